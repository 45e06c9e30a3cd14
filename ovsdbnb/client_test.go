package ovsdbnb_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

func TestDialRefusesBadOptions(t *testing.T) {
	pem := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(pem, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts ovsdbnb.Options
		want string
	}{
		{"no endpoint", ovsdbnb.Options{}, "no endpoints"},
		{"bad scheme", ovsdbnb.Options{Endpoints: []string{"http://127.0.0.1:6641"}}, "want a unix, tcp or ssl scheme"},
		{"ssl without files", ovsdbnb.Options{Endpoints: []string{"ssl:127.0.0.1:6641"}}, "needs PrivateKey, Certificate and CACert"},
		{"ssl with a bad key pair", ovsdbnb.Options{Endpoints: []string{"ssl:127.0.0.1:6641"},
			PrivateKey: pem, Certificate: pem, CACert: pem}, "load key pair"},
		{"probe not above connect timeout", ovsdbnb.Options{Endpoints: []string{"tcp:127.0.0.1:6641"},
			ConnectTimeout: time.Second, InactivityProbe: time.Second}, "must exceed the connect timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ovsdbnb.Dial(context.Background(), tc.opts)
			if err == nil {
				c.Close()
				t.Fatalf("Dial succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
