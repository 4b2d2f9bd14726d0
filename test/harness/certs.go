package harness

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"time"
)

// ServerCert is a TLS server certificate for 127.0.0.1 signed by a CA, in
// the layout function-sdk-go's --tls-server-certs-dir and Crossplane's TLS
// Secrets use: tls.crt, tls.key and ca.crt.
type ServerCert struct {
	Cert, Key, CA []byte
}

// SignServerCert signs a certificate for 127.0.0.1 (and localhost) with the
// CA whose PEM certificate and key are given, as Crossplane's own package
// runtime would for a function it runs.
func SignServerCert(caCertPEM, caKeyPEM []byte, commonName string) (*ServerCert, error) {
	ca, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		DNSNames:     []string{commonName, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	signer, ok := ca.PrivateKey.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("the CA key is not an RSA key")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	return &ServerCert{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		CA:   caCertPEM,
	}, nil
}
