package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Cert is a certificate and key written by WriteCert.
type Cert struct {
	Cert              *x509.Certificate
	Key               *ecdsa.PrivateKey
	CertFile, KeyFile string // PEM files
}

// WriteCert writes a P-256 certificate for name (as its common and DNS
// name, plus the IP 127.0.0.1, for server and client use) and its key to
// dir/<name>.crt and dir/<name>.key. It is signed by ca, or is a
// self-signed CA when ca is nil. It is valid for an hour either side of
// now.
func WriteCert(t T, dir, name string, ca *Cert) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testbed: certificate %s: %v", name, err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{name}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature}
	parent, parentKey := tmpl, key
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		parent, parentKey = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("testbed: certificate %s: %v", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("testbed: certificate %s: %v", name, err)
	}
	c := &Cert{Key: key, CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	for file, block := range map[string]*pem.Block{c.CertFile: {Type: "CERTIFICATE", Bytes: der},
		c.KeyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatalf("testbed: certificate %s: %v", name, err)
		}
	}
	if c.Cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatalf("testbed: certificate %s: %v", name, err)
	}
	return c
}
