package metrics

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// certCheckEvery is how often a certificate from files is checked for a
// change (a renewed Secret reaches a mounted volume within a minute or
// two).
const certCheckEvery = 10 * time.Second

// TLSConfig returns the secure metrics' server configuration: the
// certificate and key in certFile and keyFile (PEM), read again when
// either changes, or, both empty, a self-signed certificate for host and
// localhost made now (as controller-runtime's metrics server does; a
// scraper then skips verification or pins it).
func TLSConfig(certFile, keyFile, host string, log *slog.Logger) (*tls.Config, error) {
	// HTTP/1.1 only, as controller-runtime's metrics server by default.
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	switch {
	case certFile == "" && keyFile == "":
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, []string{"localhost"})
		if err != nil {
			return nil, fmt.Errorf("self-signed metrics certificate: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("self-signed metrics certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case certFile == "" || keyFile == "":
		return nil, errors.New("metrics certificate: give both the certificate and the key file, or neither")
	default:
		f := &fileCert{certFile: certFile, keyFile: keyFile, log: log}
		if err := f.reload(); err != nil {
			return nil, err
		}
		f.checked = time.Now()
		c.GetCertificate = f.get
	}
	return c, nil
}

// fileCert is a certificate read from files, read again when they
// change.
type fileCert struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	mod     [2]time.Time
	checked time.Time
}

// get is tls.Config.GetCertificate: the certificate, read again first
// when the files were last looked at certCheckEvery ago and changed
// since. A failed reading keeps the certificate it had.
func (f *fileCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= certCheckEvery {
		f.checked = time.Now()
		if err := f.reload(); err != nil {
			f.log.Error("metrics certificate: keeping the one loaded", "err", err)
		}
	}
	return f.cert, nil
}

// reload reads the files when their modification times differ from
// those of the last reading.
func (f *fileCert) reload() error {
	var mod [2]time.Time
	for i, p := range []string{f.certFile, f.keyFile} {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("metrics certificate: %w", err)
		}
		mod[i] = st.ModTime()
	}
	if f.cert != nil && mod == f.mod {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("metrics certificate: %w", err)
	}
	if f.cert != nil {
		f.log.Info("metrics certificate read again", "cert", f.certFile)
	}
	f.cert, f.mod = &cert, mod
	return nil
}
