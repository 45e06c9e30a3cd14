package metrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
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

// KubeAuth admits a request whose bearer token the API server
// authenticates (TokenReview) and whose user it authorizes for the
// request's verb on its path as a non-resource URL (SubjectAccessReview):
// get on /metrics. It is k8s.io/apiserver's delegating authenticator and
// authorizer, with their caches, as controller-runtime's
// WithAuthenticationAndAuthorization filter uses them.
type KubeAuth struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	log   *slog.Logger
}

// NewKubeAuth returns a KubeAuth asking the API server through cs; it
// calls nothing until a request comes.
func NewKubeAuth(cs kubernetes.Interface, log *slog.Logger) (*KubeAuth, error) {
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  cs.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &reviewBackoff,
		CacheTTL:                 TokenCacheTTL,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cs.AuthorizationV1(),
		AllowCacheTTL:             AllowCacheTTL,
		DenyCacheTTL:              DenyCacheTTL,
		WebhookRetryBackoff:       &reviewBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return &KubeAuth{authn: authn, authz: authz, log: log}, nil
}

// Wrap serves h to the requests a admits: 401 without a token the API
// server accepts, 403 when it does not allow the user the URL, 500 when
// it could not be asked.
func (a *KubeAuth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := a.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				a.log.Debug("metrics: unauthenticated", "remote", r.RemoteAddr, "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
		decision, reason, err := a.authz.Authorize(r.Context(), attrs)
		switch {
		case err != nil:
			a.log.Warn("metrics: authorization failed", "user", res.User.GetName(), "err", err)
			http.Error(w, "Authorization error", http.StatusInternalServerError)
		case decision != authorizer.DecisionAllow:
			a.log.Debug("metrics: forbidden", "user", res.User.GetName(), "path", r.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", res.User.GetName(), attrs.Verb, attrs.Path),
				http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}
