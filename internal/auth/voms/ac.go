package voms

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Object identifiers of VOMS and RFC 5755.
var (
	// OIDExtension is the proxy certificate extension holding the ACs.
	OIDExtension = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 5}
	// OIDFQANs is the AC attribute holding the FQANs.
	OIDFQANs = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 4}
	// OIDCerts is the AC extension holding the VOMS server's certificate
	// chain (used with LSC files).
	OIDCerts = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 10}
	// OIDTags is the AC extension of VOMS generic attributes.
	OIDTags = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 11}
	// OIDTargets is the RFC 5755 AC targeting extension.
	OIDTargets = asn1.ObjectIdentifier{2, 5, 29, 55}
	// oidNoRevAvail and oidAuthorityKeyID are the other extensions VOMS
	// servers add.
	oidNoRevAvail     = asn1.ObjectIdentifier{2, 5, 29, 56}
	oidAuthorityKeyID = asn1.ObjectIdentifier{2, 5, 29, 35}
)

// AC is a parsed, not yet verified, VOMS attribute certificate.
type AC struct {
	// Raw is the whole AC; RawInfo the signed part.
	Raw, RawInfo []byte
	// HolderIssuer and HolderSerial name the certificate the AC was issued
	// to (its issuer's DER name and serial number).
	HolderIssuer []byte
	HolderSerial *big.Int
	// IssuerName is the DER name of the VOMS server that signed it.
	IssuerName []byte
	Serial     *big.Int
	NotBefore  time.Time
	NotAfter   time.Time
	// VO, Host and Port come from the FQAN policy authority
	// "vo://host:port".
	VO, Host, Port string
	// FQANs as issued ("/cms/Role=NULL/Capability=NULL").
	FQANs []string
	// Certs is the VOMS server's chain carried in the AC (may be empty).
	Certs []*x509.Certificate
	// Targets are the hosts the AC is restricted to (empty: any).
	Targets []string

	sigAlg    x509.SignatureAlgorithm
	signature []byte
}

type attributeCertificate struct {
	Info   asn1.RawValue
	SigAlg pkix.AlgorithmIdentifier
	Sig    asn1.BitString
}

type acInfo struct {
	Version    int
	Holder     asn1.RawValue
	Issuer     asn1.RawValue
	SigAlg     pkix.AlgorithmIdentifier
	Serial     *big.Int
	Validity   acValidity
	Attributes []acAttribute
	IssuerUID  asn1.BitString   `asn1:"optional"`
	Extensions []pkix.Extension `asn1:"optional"`
}

type acValidity struct {
	NotBefore time.Time `asn1:"generalized"`
	NotAfter  time.Time `asn1:"generalized"`
}

type acAttribute struct {
	Type   asn1.ObjectIdentifier
	Values []asn1.RawValue `asn1:"set"`
}

// ExtractACs returns the DER ACs in the VOMS extension value of a proxy
// certificate: a SEQUENCE OF SEQUENCE OF AttributeCertificate.
func ExtractACs(ext []byte) ([][]byte, error) {
	var outer []asn1.RawValue
	if rest, err := asn1.Unmarshal(ext, &outer); err != nil || len(rest) > 0 {
		return nil, errors.New("malformed VOMS extension")
	}
	var acs [][]byte
	for _, inner := range outer {
		var seq []asn1.RawValue
		if rest, err := asn1.Unmarshal(inner.FullBytes, &seq); err != nil || len(rest) > 0 {
			return nil, errors.New("malformed VOMS extension: AC list")
		}
		for _, ac := range seq {
			acs = append(acs, ac.FullBytes)
			if len(acs) > maxACs {
				return nil, fmt.Errorf("more than %d ACs in the VOMS extension", maxACs)
			}
		}
	}
	return acs, nil
}

// maxACs bounds the ACs read from one proxy (one per VO in practice).
const maxACs = 16

// ParseAC decodes one VOMS attribute certificate. It checks the structure
// only; Verifier.Verify checks signature, holder, time and issuer.
func ParseAC(der []byte) (*AC, error) {
	var ac attributeCertificate
	if rest, err := asn1.Unmarshal(der, &ac); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("malformed attribute certificate: %w", orTrailing(err))
	}
	var info acInfo
	if rest, err := asn1.Unmarshal(ac.Info.FullBytes, &info); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("malformed attribute certificate info: %w", orTrailing(err))
	}
	if info.Version != 1 {
		return nil, fmt.Errorf("attribute certificate version %d, want 1 (v2)", info.Version)
	}
	if !info.SigAlg.Algorithm.Equal(ac.SigAlg.Algorithm) {
		return nil, errors.New("inner and outer signature algorithms differ")
	}
	out := &AC{Raw: der, RawInfo: ac.Info.FullBytes, Serial: info.Serial,
		NotBefore: info.Validity.NotBefore, NotAfter: info.Validity.NotAfter,
		signature: ac.Sig.RightAlign()}
	var err error
	if out.sigAlg, err = sigAlgorithm(ac.SigAlg.Algorithm); err != nil {
		return nil, err
	}
	if out.HolderIssuer, out.HolderSerial, err = parseHolder(info.Holder); err != nil {
		return nil, err
	}
	if out.IssuerName, err = parseIssuer(info.Issuer); err != nil {
		return nil, err
	}
	found := false
	for _, a := range info.Attributes {
		if !a.Type.Equal(OIDFQANs) {
			continue
		}
		if found || len(a.Values) != 1 {
			return nil, errors.New("want exactly one VOMS FQAN attribute with one value")
		}
		found = true
		if err := out.parseFQANAttr(a.Values[0].FullBytes); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, errors.New("attribute certificate has no VOMS FQAN attribute")
	}
	for _, e := range info.Extensions {
		switch {
		case e.Id.Equal(OIDCerts):
			if out.Certs, err = parseCerts(e.Value); err != nil {
				return nil, err
			}
		case e.Id.Equal(OIDTargets):
			out.Targets = collectNames(e.Value, nil)
			if len(out.Targets) == 0 {
				return nil, errors.New("AC targets extension names no host")
			}
		case e.Id.Equal(OIDTags), e.Id.Equal(oidNoRevAvail), e.Id.Equal(oidAuthorityKeyID):
		default:
			if e.Critical {
				return nil, fmt.Errorf("attribute certificate has an unknown critical extension %s", e.Id)
			}
		}
	}
	return out, nil
}

func orTrailing(err error) error {
	if err == nil {
		return errors.New("trailing data")
	}
	return err
}

// parseHolder reads Holder.baseCertificateID ([0] IssuerSerial).
func parseHolder(h asn1.RawValue) ([]byte, *big.Int, error) {
	bad := errors.New("AC holder has no baseCertificateID (issuer and serial)")
	if h.Tag != asn1.TagSequence || h.Class != asn1.ClassUniversal {
		return nil, nil, bad
	}
	rest := h.Bytes
	for len(rest) > 0 {
		var f asn1.RawValue
		var err error
		if rest, err = asn1.Unmarshal(rest, &f); err != nil {
			return nil, nil, bad
		}
		if f.Class != asn1.ClassContextSpecific || f.Tag != 0 || !f.IsCompound {
			continue
		}
		// IssuerSerial ::= SEQUENCE { issuer GeneralNames, serial INTEGER, ... }
		var gn asn1.RawValue
		body, err := asn1.Unmarshal(f.Bytes, &gn)
		if err != nil {
			return nil, nil, bad
		}
		name := directoryName(gn)
		var serial *big.Int
		if _, err := asn1.Unmarshal(body, &serial); err != nil || name == nil {
			return nil, nil, bad
		}
		return name, serial, nil
	}
	return nil, nil, bad
}

// parseIssuer reads AttCertIssuer: v2Form [0] { issuerName GeneralNames }
// or v1Form GeneralNames.
func parseIssuer(v asn1.RawValue) ([]byte, error) {
	bad := errors.New("AC issuer has no directory name")
	var gn asn1.RawValue
	switch {
	case v.Class == asn1.ClassContextSpecific && v.Tag == 0 && v.IsCompound:
		if _, err := asn1.Unmarshal(v.Bytes, &gn); err != nil {
			return nil, bad
		}
	case v.Class == asn1.ClassUniversal && v.Tag == asn1.TagSequence:
		gn = v
	default:
		return nil, bad
	}
	if name := directoryName(gn); name != nil {
		return name, nil
	}
	return nil, bad
}

// directoryName returns the first directoryName ([4] Name) in GeneralNames.
func directoryName(gn asn1.RawValue) []byte {
	if gn.Class != asn1.ClassUniversal || gn.Tag != asn1.TagSequence {
		return nil
	}
	rest := gn.Bytes
	for len(rest) > 0 {
		var n asn1.RawValue
		var err error
		if rest, err = asn1.Unmarshal(rest, &n); err != nil {
			return nil
		}
		if n.Class == asn1.ClassContextSpecific && n.Tag == 4 && n.IsCompound {
			var name asn1.RawValue
			if r, err := asn1.Unmarshal(n.Bytes, &name); err == nil && len(r) == 0 && name.Tag == asn1.TagSequence {
				return name.FullBytes
			}
			return nil
		}
	}
	return nil
}

// parseFQANAttr reads IetfAttrSyntax: [0] policyAuthority GeneralNames
// ("vo://host:port") and a SEQUENCE of OCTET STRING FQANs.
func (ac *AC) parseFQANAttr(der []byte) error {
	var seq asn1.RawValue
	if rest, err := asn1.Unmarshal(der, &seq); err != nil || len(rest) > 0 || seq.Tag != asn1.TagSequence {
		return errors.New("malformed VOMS FQAN attribute")
	}
	rest := seq.Bytes
	var f asn1.RawValue
	var err error
	if rest, err = asn1.Unmarshal(rest, &f); err != nil {
		return errors.New("malformed VOMS FQAN attribute")
	}
	if f.Class != asn1.ClassContextSpecific || f.Tag != 0 {
		return errors.New("VOMS FQAN attribute has no policy authority")
	}
	names := collectNames(f.FullBytes, nil)
	if len(names) != 1 {
		return errors.New("VOMS policy authority must be one URI vo://host:port")
	}
	vo, hostport, ok := strings.Cut(names[0], "://")
	if !ok || vo == "" {
		return fmt.Errorf("VOMS policy authority %q: want vo://host:port", names[0])
	}
	ac.VO = vo
	ac.Host, ac.Port = hostport, ""
	if i := strings.LastIndexByte(hostport, ':'); i > 0 {
		ac.Host, ac.Port = hostport[:i], hostport[i+1:]
	}
	var vals []asn1.RawValue
	if r, err := asn1.Unmarshal(rest, &vals); err != nil || len(r) > 0 {
		return errors.New("malformed VOMS FQAN values")
	}
	for _, v := range vals {
		if v.Class != asn1.ClassUniversal || v.Tag != asn1.TagOctetString {
			return errors.New("VOMS FQAN values must be octet strings")
		}
		ac.FQANs = append(ac.FQANs, string(v.Bytes))
	}
	if len(ac.FQANs) == 0 {
		return errors.New("attribute certificate carries no FQAN")
	}
	return nil
}

// collectNames walks DER and returns the URIs ([6]) and DNS names ([2])
// of the GeneralNames in it, whatever the nesting.
func collectNames(der []byte, out []string) []string {
	for len(der) > 0 && len(out) < 64 {
		var v asn1.RawValue
		rest, err := asn1.Unmarshal(der, &v)
		if err != nil {
			return out
		}
		der = rest
		switch {
		case v.Class == asn1.ClassContextSpecific && !v.IsCompound && (v.Tag == 6 || v.Tag == 2):
			out = append(out, string(v.Bytes))
		case v.IsCompound:
			out = collectNames(v.Bytes, out)
		}
	}
	return out
}

// parseCerts reads the VOMS certs extension: SEQUENCE { SEQUENCE OF
// Certificate }.
func parseCerts(der []byte) ([]*x509.Certificate, error) {
	var outer []asn1.RawValue
	if rest, err := asn1.Unmarshal(der, &outer); err != nil || len(rest) > 0 || len(outer) != 1 {
		return nil, errors.New("malformed VOMS certs extension")
	}
	var certs []asn1.RawValue
	if rest, err := asn1.Unmarshal(outer[0].FullBytes, &certs); err != nil || len(rest) > 0 {
		return nil, errors.New("malformed VOMS certs extension")
	}
	var out []*x509.Certificate
	for _, c := range certs {
		cert, err := x509.ParseCertificate(c.FullBytes)
		if err != nil {
			return nil, fmt.Errorf("VOMS certs extension: %w", err)
		}
		out = append(out, cert)
		if len(out) > 8 {
			return nil, errors.New("VOMS certs extension holds too many certificates")
		}
	}
	return out, nil
}

var sigAlgs = []struct {
	oid asn1.ObjectIdentifier
	alg x509.SignatureAlgorithm
}{
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 5}, x509.SHA1WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}, x509.SHA256WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 12}, x509.SHA384WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 13}, x509.SHA512WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}, x509.ECDSAWithSHA256},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}, x509.ECDSAWithSHA384},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 4}, x509.ECDSAWithSHA512},
}

// sigAlgorithm maps an AC signature algorithm; SHA-1 with RSA is still
// what older VOMS servers use, MD5 is refused.
func sigAlgorithm(oid asn1.ObjectIdentifier) (x509.SignatureAlgorithm, error) {
	for _, a := range sigAlgs {
		if a.oid.Equal(oid) {
			return a.alg, nil
		}
	}
	return 0, fmt.Errorf("attribute certificate signature algorithm %s is not supported", oid)
}

// SigAlgorithmOID returns the OID for a supported signature algorithm (for
// issuing test ACs).
func SigAlgorithmOID(alg x509.SignatureAlgorithm) (asn1.ObjectIdentifier, bool) {
	for _, a := range sigAlgs {
		if a.alg == alg {
			return a.oid, true
		}
	}
	return nil, false
}
