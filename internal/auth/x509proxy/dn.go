package x509proxy

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"strings"
)

// shortNames are the attribute names OpenSSL prints in grid DNs.
var shortNames = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.5":                    "serialNumber",
	"2.5.4.4":                    "SN",
	"2.5.4.42":                   "GN",
	"2.5.4.12":                   "title",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
	"1.2.840.113549.1.9.1":       "emailAddress",
}

// DN renders a DER-encoded X.501 name (a certificate's RawSubject or
// RawIssuer) in the slash form grid tools print and grid-mapfiles and
// VOMS LSC files use: "/DC=ch/DC=cern/OU=Users/CN=alice". Attributes are
// in the order of the certificate.
func DN(raw []byte) (string, error) {
	var rdns pkix.RDNSequence
	rest, err := asn1.Unmarshal(raw, &rdns)
	if err != nil {
		return "", fmt.Errorf("parse name: %w", err)
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("parse name: trailing data")
	}
	return formatRDNs(rdns), nil
}

func formatRDNs(rdns pkix.RDNSequence) string {
	var b strings.Builder
	for _, rdn := range rdns {
		for i, atv := range rdn {
			if i == 0 {
				b.WriteByte('/')
			} else {
				b.WriteByte('+')
			}
			name, ok := shortNames[atv.Type.String()]
			if !ok {
				name = atv.Type.String()
			}
			b.WriteString(name)
			b.WriteByte('=')
			fmt.Fprint(&b, atv.Value)
		}
	}
	return b.String()
}

// MustDN is DN for names that crypto/x509 already parsed; it never fails.
func MustDN(raw []byte) string {
	s, err := DN(raw)
	if err != nil {
		return "<unparseable name>"
	}
	return s
}
