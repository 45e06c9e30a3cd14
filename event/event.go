// Package event is the one public shape the pure packages (egress, lbsvc, ...)
// use to say what a Kubernetes object's owner should see: a Kubernetes
// Event about bad input that was skipped or a decision that was made. The
// daemon records them through client-go's event recorder; in manifests
// mode they go to the log.
package event

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event is a Kubernetes event about one object.
type Event struct {
	// Object is the object the event is about.
	Object corev1.ObjectReference
	// Type is corev1.EventTypeWarning or corev1.EventTypeNormal.
	Type    string
	Reason  string
	Message string
}

// Ref refers to obj as an object of the given API version and kind.
func Ref(apiVersion, kind string, obj metav1.Object) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(),
		Name: obj.GetName(), UID: obj.GetUID()}
}

// Warningf returns a Warning event about obj.
func Warningf(obj corev1.ObjectReference, reason, format string, args ...any) Event {
	return Event{Object: obj, Type: corev1.EventTypeWarning, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Normalf returns a Normal event about obj.
func Normalf(obj corev1.ObjectReference, reason, format string, args ...any) Event {
	return Event{Object: obj, Type: corev1.EventTypeNormal, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// String reads "Warning Service default/web Reason: message".
func (e Event) String() string {
	name := e.Object.Name
	if e.Object.Namespace != "" {
		name = e.Object.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %s %s %s: %s", e.Type, e.Object.Kind, name, e.Reason, e.Message)
}
