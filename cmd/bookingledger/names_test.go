package main

// The names the end-to-end tests use, from the packages under internal/ that own them.

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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/cmd/bookingledger/internal/admincmd"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/devsinks"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/cmd/bookingledger/internal/relaycmd"
	"bookingledger/cmd/bookingledger/internal/serve"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
	"bookingledger/cmd/bookingledger/internal/synccmd"
)

var (
	exitCode   = cmdline.ExitCode
	openPool   = ledgerdb.OpenPool
	readiness  = serve.Readiness
	parseSteps = stepscmd.Parse
)

const (
	defaultPoolMaxConns = ledgerdb.DefaultPoolMaxConns

	envDatabaseURL   = cmdline.EnvDatabaseURL
	envAdminAddr     = serve.EnvAdminAddr
	envAllowNewer    = serve.EnvAllowNewer
	envResourcesFile = admincmd.EnvResourcesFile

	envRelayAllowPrivate = relaycmd.EnvAllowPrivate

	envAcuityAPIURL     = synccmd.EnvAcuityAPIURL
	envCalendlyAPIToken = synccmd.EnvCalendlyAPIToken
	envCalendlyAPIURL   = synccmd.EnvCalendlyAPIURL
	envStripeAPIKey     = synccmd.EnvStripeAPIKey
	envStripeAPIURL     = synccmd.EnvStripeAPIURL

	envCalDAVPassword        = stepscmd.EnvCalDAVPassword
	envCalDAVURLTemplate     = stepscmd.EnvCalDAVURLTemplate
	envCalDAVUsername        = stepscmd.EnvCalDAVUsername
	envCalendarsFile         = stepscmd.EnvCalendarsFile
	envGoogleCredentials     = stepscmd.EnvGoogleCredentials
	envGoogleCredentialsFile = stepscmd.EnvGoogleCredentialsFile
	envGoogleEndpoint        = stepscmd.EnvGoogleEndpoint
	envMicrosoftClientID     = stepscmd.EnvMicrosoftClientID
	envMicrosoftEndpoint     = stepscmd.EnvMicrosoftEndpoint
	envSMTPAddr              = stepscmd.EnvSMTPAddr
	envSMTPFrom              = stepscmd.EnvSMTPFrom
	envStepsAllowPrivate     = stepscmd.EnvStepsAllowPrivate
	envStepsCallTimeout      = stepscmd.EnvStepsCallTimeout
	envStepsRetryBase        = stepscmd.EnvStepsRetryBase
	envStepsTestHold         = stepscmd.EnvStepsTestHold
	envStepsWorkers          = stepscmd.EnvStepsWorkers
	envTemplates             = stepscmd.EnvTemplates

	envDevWebhookURL = devsinks.EnvDevWebhookURL
	devStripeAPIKey  = devsinks.DevStripeAPIKey
	sinkPortsFile    = devsinks.SinkPortsFile
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key, and returns a pool that
// trusts it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bookingledger test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}
