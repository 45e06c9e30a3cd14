package event_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/event"
)

func ExampleWarningf() {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	e := event.Warningf(event.Ref("v1", "Service", svc), "InvalidLoadBalancerIP", "%q is not an IP", "10.0.0.x")
	fmt.Println(e)
	// Output: Warning Service default/web InvalidLoadBalancerIP: "10.0.0.x" is not an IP
}
