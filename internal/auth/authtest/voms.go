package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// VOMSServer is a test VOMS server: a certificate issued by a CA that
// signs attribute certificates for one VO.
type VOMSServer struct {
	Cred
	VO, Host string
	Port     int
}

// VOMSServer issues a VOMS server certificate (RSA key rsaIndex) for vo on
// host.
func (ca *CA) VOMSServer(tb testing.TB, vo, host string, rsaIndex int) *VOMSServer {
	tb.Helper()
	tmpl := &x509.Certificate{
		Subject:     Name("OU=Hosts", "CN="+host),
		DNSNames:    []string{host},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return &VOMSServer{Cred: *ca.Issue(tb, tmpl, RSAKey(tb, rsaIndex)), VO: vo, Host: host, Port: 15000}
}

// ACOpts shapes an attribute certificate.
type ACOpts struct {
	// FQANs default to "/<vo>/Role=NULL/Capability=NULL".
	FQANs []string
	// NotBefore and NotAfter default to an hour ago and 12 h from now.
	NotBefore, NotAfter time.Time
	// Targets restricts the AC to these hosts.
	Targets []string
	// NoCerts leaves the server's certificate out of the AC.
	NoCerts bool
	// HolderSerial overrides the holder's serial number.
	HolderSerial int64
	// CorruptSignature flips a bit of the signature.
	CorruptSignature bool
	// VO overrides the VO of the policy authority.
	VO string
}

func tagged(class, tag int, compound bool, parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	der, err := asn1.Marshal(asn1.RawValue{Class: class, Tag: tag, IsCompound: compound, Bytes: body})
	if err != nil {
		panic(err) // only lengths can fail, which our inputs never exceed
	}
	return der
}

func seq(parts ...[]byte) []byte {
	return tagged(asn1.ClassUniversal, asn1.TagSequence, true, parts...)
}
func set(parts ...[]byte) []byte { return tagged(asn1.ClassUniversal, asn1.TagSet, true, parts...) }

func mustMarshal(v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mustMarshalParams(v any, params string) []byte {
	b, err := asn1.MarshalWithParams(v, params)
	if err != nil {
		panic(err)
	}
	return b
}

// generalNamesDir encodes GeneralNames holding one directoryName.
func generalNamesDir(rawName []byte) []byte {
	return seq(tagged(asn1.ClassContextSpecific, 4, true, rawName))
}

// AC issues an attribute certificate for holder (the user's end-entity
// certificate), DER encoded as VOMS servers do.
func (s *VOMSServer) AC(tb testing.TB, holder *x509.Certificate, o ACOpts) []byte {
	tb.Helper()
	vo := s.VO
	if o.VO != "" {
		vo = o.VO
	}
	fqans := o.FQANs
	if fqans == nil {
		fqans = []string{"/" + vo + "/Role=NULL/Capability=NULL"}
	}
	nb, na := o.NotBefore, o.NotAfter
	if nb.IsZero() {
		nb = time.Now().Add(-time.Hour)
	}
	if na.IsZero() {
		na = time.Now().Add(12 * time.Hour)
	}
	hserial := holder.SerialNumber
	if o.HolderSerial != 0 {
		hserial = bigInt(o.HolderSerial)
	}
	holderDER := seq(tagged(asn1.ClassContextSpecific, 0, true, generalNamesDir(holder.RawIssuer), mustMarshal(hserial)))
	issuerDER := tagged(asn1.ClassContextSpecific, 0, true, generalNamesDir(s.Cert.RawSubject))

	var algID []byte
	switch s.Key.(type) {
	case *rsa.PrivateKey:
		algID = seq(mustMarshal(asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}), mustMarshal(asn1.NullRawValue))
	case *ecdsa.PrivateKey:
		algID = seq(mustMarshal(asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}))
	default:
		tb.Fatalf("VOMS server key %T", s.Key)
	}
	validity := seq(mustMarshalParams(nb.UTC(), "generalized"), mustMarshalParams(na.UTC(), "generalized"))

	var vals [][]byte
	for _, f := range fqans {
		vals = append(vals, tagged(asn1.ClassUniversal, asn1.TagOctetString, false, []byte(f)))
	}
	authority := fmt.Sprintf("%s://%s:%d", vo, s.Host, s.Port)
	ietf := seq(tagged(asn1.ClassContextSpecific, 0, true, tagged(asn1.ClassContextSpecific, 6, false, []byte(authority))), seq(vals...))
	attrs := seq(seq(mustMarshal(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 4}), set(ietf)))

	// noRevAvail and authorityKeyIdentifier, which the VOMS library
	// requires of every AC.
	exts := [][]byte{
		seq(mustMarshal(asn1.ObjectIdentifier{2, 5, 29, 56}), mustMarshal(asn1.NullRawValue.FullBytes)),
		seq(mustMarshal(asn1.ObjectIdentifier{2, 5, 29, 35}), mustMarshal(seq(tagged(asn1.ClassContextSpecific, 0, false, s.Cert.SubjectKeyId)))),
	}
	if !o.NoCerts {
		var certs [][]byte
		for _, c := range s.Chain {
			certs = append(certs, c.Raw)
		}
		val := seq(seq(certs...))
		exts = append(exts, seq(mustMarshal(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 10}), mustMarshal(val)))
	}
	if len(o.Targets) > 0 {
		var ts [][]byte
		for _, t := range o.Targets {
			ts = append(ts, seq(tagged(asn1.ClassContextSpecific, 0, true, tagged(asn1.ClassContextSpecific, 6, false, []byte(t)))))
		}
		val := seq(seq(ts...))
		exts = append(exts, seq(mustMarshal(asn1.ObjectIdentifier{2, 5, 29, 55}), mustMarshal(true), mustMarshal(val)))
	}
	info := seq(mustMarshal(1), holderDER, issuerDER, algID, mustMarshal(nextSerial()), validity, attrs, seq(exts...))

	sum := sha256.Sum256(info)
	sig, err := s.Key.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		tb.Fatal(err)
	}
	if o.CorruptSignature {
		sig[len(sig)/2] ^= 1
	}
	return seq(info, algID, mustMarshal(asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)}))
}

// VOMSExtension encodes ACs as the value of the VOMS proxy extension.
func VOMSExtension(acs ...[]byte) []byte {
	return seq(seq(acs...))
}

// WriteLSC writes vomsdir/<vo>/<host>.lsc naming the server's DN chain.
func (s *VOMSServer) WriteLSC(tb testing.TB, vomsdir string) {
	tb.Helper()
	d := filepath.Join(vomsdir, s.VO)
	if err := os.MkdirAll(d, 0o755); err != nil {
		tb.Fatal(err)
	}
	content := dn(s.Cert.RawSubject) + "\n" + dn(s.Cert.RawIssuer) + "\n"
	if err := os.WriteFile(filepath.Join(d, s.Host+".lsc"), []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// WritePEM writes the server's certificate to vomsdir/<vo>/<host>.pem.
func (s *VOMSServer) WritePEM(tb testing.TB, vomsdir string) {
	tb.Helper()
	d := filepath.Join(vomsdir, s.VO)
	if err := os.MkdirAll(d, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, s.Host+".pem"), CertPEM(s.Cert), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func bigInt(n int64) *big.Int { return big.NewInt(n) }

// dn renders a name in slash form for the attribute types Name uses. It is
// written independently of x509proxy.DN so that tests compare the two.
func dn(raw []byte) string {
	var rdns pkix.RDNSequence
	if _, err := asn1.Unmarshal(raw, &rdns); err != nil {
		panic(err)
	}
	short := map[string]string{"0.9.2342.19200300.100.1.25": "DC", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.3": "CN"}
	var b strings.Builder
	for _, rdn := range rdns {
		for _, atv := range rdn {
			fmt.Fprintf(&b, "/%s=%v", short[atv.Type.String()], atv.Value)
		}
	}
	return b.String()
}

// DN is the slash-form DN of a certificate's subject.
func DN(c *x509.Certificate) string { return dn(c.RawSubject) }
