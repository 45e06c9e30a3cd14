package metrics

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// How long the API server's answers are kept (controller-runtime's
// metrics filter and kube-rbac-proxy keep them as long): a scraper asks
// every 15-60 s, so one TokenReview a minute and one SubjectAccessReview
// every five minutes per scraper; a denial is asked again after 30 s.
const (
	TokenCacheTTL = time.Minute
	AllowCacheTTL = 5 * time.Minute
	DenyCacheTTL  = 30 * time.Second
)

// reviewBackoff is how a failed review is retried: the API server's
// delegated authentication's default (apiserver options'
// DefaultAuthWebhookRetryBackoff), about 5 s in all.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// reviewTimeout bounds one review request.
const reviewTimeout = 10 * time.Second

// KubeAuth admits a request whose bearer token the API server
// authenticates (TokenReview) and whose user it authorizes for the
// request's verb on its path as a non-resource URL (SubjectAccessReview):
// get on /metrics. Answers are cached (TokenCacheTTL, AllowCacheTTL,
// DenyCacheTTL; errors are not) and failed reviews retried, as
// k8s.io/apiserver's delegating authenticator and authorizer do for
// controller-runtime's WithAuthenticationAndAuthorization filter.
// Deviation: the reviews are written here on client-go's typed clients
// rather than through k8s.io/apiserver, whose authentication packages
// link CEL, OpenTelemetry and gRPC into every instance's binary (12 MB of
// its 125 MB) for two API calls.
type KubeAuth struct {
	cs    kubernetes.Interface
	cache *cache.Expiring // token hash -> *authnv1.UserInfo (nil: not authenticated); access key -> bool
	log   *slog.Logger
}

// NewKubeAuth returns a KubeAuth asking the API server through cs; it
// calls nothing until a request comes.
func NewKubeAuth(cs kubernetes.Interface, log *slog.Logger) (*KubeAuth, error) {
	if cs == nil {
		return nil, fmt.Errorf("metrics authentication: no API client")
	}
	return &KubeAuth{cs: cs, cache: cache.NewExpiring(), log: log}, nil
}

// Wrap serves h to the requests a admits: 401 without a token the API
// server accepts, 403 when it does not allow the user the URL, 500 when
// it could not be asked.
func (a *KubeAuth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := a.authenticate(r)
		if err != nil || user == nil {
			if err != nil {
				a.log.Debug("metrics: unauthenticated", "remote", r.RemoteAddr, "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method)
		allowed, err := a.authorize(r.Context(), user, verb, r.URL.Path)
		switch {
		case err != nil:
			a.log.Warn("metrics: authorization failed", "user", user.Username, "err", err)
			http.Error(w, "Authorization error", http.StatusInternalServerError)
		case !allowed:
			a.log.Debug("metrics: forbidden", "user", user.Username, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", user.Username, verb, r.URL.Path),
				http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// authenticate is the user of r's bearer token, nil when it has none or
// the API server does not authenticate it.
func (a *KubeAuth) authenticate(r *http.Request) (*authnv1.UserInfo, error) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, nil
	}
	key := fmt.Sprintf("token %x", sha256.Sum256([]byte(strings.TrimSpace(token))))
	if v, ok := a.cache.Get(key); ok {
		return v.(*authnv1.UserInfo), nil
	}
	var st authnv1.TokenReviewStatus
	err := review(r.Context(), func(ctx context.Context) error {
		res, err := a.cs.AuthenticationV1().TokenReviews().Create(ctx,
			&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: strings.TrimSpace(token)}}, metav1.CreateOptions{})
		if err == nil {
			st = res.Status
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	var user *authnv1.UserInfo
	if st.Authenticated {
		user = &st.User
	}
	a.cache.Set(key, user, TokenCacheTTL)
	return user, nil
}

// authorize says whether the API server allows user verb on the
// non-resource path.
func (a *KubeAuth) authorize(ctx context.Context, user *authnv1.UserInfo, verb, path string) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	spec := authzv1.SubjectAccessReviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb}}
	key := accessKey(spec)
	if v, ok := a.cache.Get(key); ok {
		return v.(bool), nil
	}
	var allowed bool
	err := review(ctx, func(ctx context.Context) error {
		res, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err == nil {
			allowed = res.Status.Allowed && !res.Status.Denied
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	a.cache.Set(key, allowed, map[bool]time.Duration{true: AllowCacheTTL, false: DenyCacheTTL}[allowed])
	return allowed, nil
}

// accessKey identifies a SubjectAccessReview's question in the cache.
func accessKey(s authzv1.SubjectAccessReviewSpec) string {
	extra := make([]string, 0, len(s.Extra))
	for k, v := range s.Extra {
		extra = append(extra, fmt.Sprintf("%q=%q", k, []string(v)))
	}
	slices.Sort(extra)
	return fmt.Sprintf("access %q %q %q %s %s %s", s.User, s.UID, s.Groups, extra, s.NonResourceAttributes.Verb, s.NonResourceAttributes.Path)
}

// review calls f, each call bounded by reviewTimeout, until it succeeds or
// reviewBackoff's steps are spent; the last error is returned.
func review(ctx context.Context, f func(context.Context) error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, reviewBackoff, func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		last = f(rctx)
		return last == nil, nil
	})
	if last != nil {
		return last
	}
	return err
}
