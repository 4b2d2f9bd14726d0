package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"
)

// ServerCert is a TLS server certificate signed by a CA, in the layout
// function-sdk-go's --tls-server-certs-dir and Crossplane's TLS Secrets use:
// tls.crt, tls.key and ca.crt.
type ServerCert struct {
	Cert, Key, CA []byte
}

// SignServerCert signs a certificate for ip (and localhost) with the CA
// whose PEM certificate and key are given, as Crossplane's own package
// runtime would for a function it runs.
func SignServerCert(caCertPEM, caKeyPEM []byte, commonName string, ip net.IP) (*ServerCert, error) {
	return signCert(caCertPEM, caKeyPEM, []string{commonName, "localhost"}, []net.IP{ip})
}

// newCA makes a self-signed CA; it returns its PEM certificate and key.
func newCA(commonName string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

// signCert signs a server certificate for names and ips.
func signCert(caCertPEM, caKeyPEM []byte, names []string, ips []net.IP) (*ServerCert, error) {
	ca, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, err
	}
	signer, ok := ca.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA key cannot sign")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &ServerCert{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		CA:   caCertPEM,
	}, nil
}

// TLSServerConfig is a server configuration with a certificate for ips,
// signed by a CA of its own, and that CA's PEM certificate: for a test
// server that clients must verify.
func TLSServerConfig(t testing.TB, ips ...net.IP) (*tls.Config, []byte) {
	t.Helper()
	return TLSServer(t, "test-server-ca", []string{"test-server"}, ips)
}

// tlsServer is a server configuration with a certificate for names and
// ips from a new CA called caName, and the CA's PEM certificate.
func TLSServer(t testing.TB, caName string, names []string, ips []net.IP) (*tls.Config, []byte) {
	t.Helper()
	ca, caKey, err := newCA(caName)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := signCert(ca, caKey, names, ips)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(cert.Cert, cert.Key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}}, ca
}
