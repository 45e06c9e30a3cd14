package scale

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// egressv1.Resource is the EgressIP custom resource.

// LoaderConfig returns a copy of c for loading: no client-side rate limit
// and protobuf for the built-in kinds.
func LoaderConfig(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.QPS, c.Burst = -1, 0
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c.Timeout = time.Minute
	return c
}

// Loader writes generated objects straight to the apiserver (no
// controllers run), Workers requests at a time.
type Loader struct {
	CS      kubernetes.Interface
	Dyn     dynamic.Interface
	Workers int
}

// NewLoader returns a Loader of config (an admin's) with LoaderConfig's
// settings and workers concurrent requests.
func NewLoader(config *rest.Config, workers int) (*Loader, error) {
	c := LoaderConfig(config)
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("scale: loader client: %w", err)
	}
	jc := rest.CopyConfig(c)
	jc.ContentType, jc.AcceptContentTypes = "", "" // custom resources are JSON only
	dyn, err := dynamic.NewForConfig(jc)
	if err != nil {
		return nil, fmt.Errorf("scale: loader client: %w", err)
	}
	return &Loader{CS: cs, Dyn: dyn, Workers: workers}, nil
}

// LoadStep is what loading one kind took.
type LoadStep struct {
	Kind              string
	Objects, Requests int
	Duration          time.Duration
}

// Grow creates the objects of to that from does not have (from is the
// zero Shape for an empty cluster), kind by kind, and returns what each
// kind took. Pods and nodes are created, then given their status, as the
// kubelet would.
func (l *Loader) Grow(ctx context.Context, from, to Shape) ([]LoadStep, error) {
	core := l.CS.CoreV1()
	steps := []struct {
		kind     string
		from, to int
		requests int // per object
		create   func(ctx context.Context, i int) error
	}{
		{"Namespace", from.Namespaces, to.Namespaces, 1, func(ctx context.Context, i int) error {
			_, err := core.Namespaces().Create(ctx, Namespace(i), metav1.CreateOptions{})
			return exists(err)
		}},
		{"Node", from.Nodes, to.Nodes, 2, func(ctx context.Context, i int) error {
			want := Node(i)
			return createWithStatus(ctx, core.Nodes(), want, want.Name, true, func(n *corev1.Node) { n.Status = want.Status })
		}},
		{"Pod", from.Pods, to.Pods, 2, func(ctx context.Context, i int) error {
			want := Pod(i)
			return createWithStatus(ctx, core.Pods(want.Namespace), want, want.Name, true, func(p *corev1.Pod) { p.Status = want.Status })
		}},
		{"Service", from.Services, to.Services, 1, func(ctx context.Context, j int) error {
			want := Service(j)
			return createWithStatus(ctx, core.Services(want.Namespace), want, want.Name, len(want.Status.LoadBalancer.Ingress) > 0,
				func(s *corev1.Service) { s.Status = want.Status })
		}},
		{"EndpointSlice", from.Services, to.Services, 1, func(ctx context.Context, j int) error {
			s := EndpointSlice(j, Endpoints(j))
			_, err := l.CS.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
			return exists(err)
		}},
		{"EgressIP", from.EgressIPs, to.EgressIPs, 1, func(ctx context.Context, k int) error {
			_, err := l.Dyn.Resource(egressv1.Resource).Create(ctx, EgressIP(k), metav1.CreateOptions{})
			return exists(err)
		}},
	}
	var out []LoadStep
	for _, s := range steps {
		if s.to <= s.from {
			continue
		}
		begin := time.Now()
		if err := parallel(ctx, s.from, s.to, l.Workers, s.create); err != nil {
			return out, fmt.Errorf("scale: load %ss %d-%d: %w", s.kind, s.from, s.to, err)
		}
		extra := 0
		if s.kind == "Service" {
			extra = countLB(s.from, s.to) // their status
		}
		out = append(out, LoadStep{Kind: s.kind, Objects: s.to - s.from, Requests: s.requests*(s.to-s.from) + extra,
			Duration: time.Since(begin)})
	}
	return out, nil
}

// statusClient is a typed client of a kind with a status subresource.
type statusClient[T any] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	UpdateStatus(context.Context, T, metav1.UpdateOptions) (T, error)
}

// createWithStatus creates obj (taking the existing object when a
// retried create finds it) and, with status, writes the status set
// gives it: the apiserver drops the status of a create.
func createWithStatus[T any](ctx context.Context, c statusClient[T], obj T, name string, status bool, set func(T)) error {
	created, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = c.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil || !status {
		return err
	}
	set(created)
	_, err = c.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

func countLB(from, to int) int {
	n := 0
	for j := from; j < to; j++ {
		if ServiceType(j) == corev1.ServiceTypeLoadBalancer {
			n++
		}
	}
	return n
}

// exists makes AlreadyExists (a create retried after a lost reply) a
// success.
func exists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// parallel calls f for every index in [from, to), workers at a time, each
// retried while its error is transient; it returns the first error that
// is not.
func parallel(ctx context.Context, from, to, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := retry(ctx, func() error { return f(ctx, i) }); err != nil {
					cancel(fmt.Errorf("object %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// retry calls f until it succeeds, fails for good, or 10 attempts.
func retry(ctx context.Context, f func() error) error {
	var err error
	for attempt := range 10 {
		if err = f(); err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return err
}

// transient reports errors worth retrying: the apiserver busy or timing
// out, a connection reset, a custom resource whose CRD is not served yet.
func transient(err error) bool {
	var ne net.Error
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsNotFound(err) ||
		apierrors.IsConflict(err) || errors.As(err, &ne)
}
