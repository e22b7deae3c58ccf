package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os/user"
	"strings"

	"github.com/hepcache/hepcache/internal/auth/gsi"
	"github.com/hepcache/hepcache/internal/auth/ztn"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// startTLS switches the connection to TLS right after kXR_protocol, as the
// server announced with kXR_gotoTLS.
func (c *conn) startTLS(ctx context.Context) error {
	if c.flags&proto.GotoTLS == 0 {
		return fmt.Errorf("roots:// to %s: the server does not switch to TLS (flags %#x): %w", c.addr, uint32(c.flags), origin.ErrNotAuthorized)
	}
	if c.br.Buffered() > 0 {
		return unavailable("roots:// to %s: data after kXR_protocol before the TLS handshake", c.addr)
	}
	tc := c.cfg.TLS.Clone()
	if tc.ServerName == "" {
		host, _, err := net.SplitHostPort(c.addr)
		if err != nil {
			host = c.addr
		}
		tc.ServerName = strings.Trim(host, "[]")
	}
	tlsConn := tls.Client(c.nc, tc)
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake with %s: %w: %w", c.addr, err, origin.ErrNotAuthorized)
	}
	c.nc = tlsConn
	c.br = bufio.NewReaderSize(progressReader{tlsConn, &c.lastRecv}, 32<<10)
	c.tls = true
	return nil
}

// secProtocols splits the login answer's security requirements
// ("&P=ztn,0:4096:&P=unix") into protocol names and parameters.
func secProtocols(sec string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(sec, "&P=")[1:] {
		name, params, _ := strings.Cut(strings.TrimRight(part, "\x00"), ",")
		out[name] = params
	}
	return out
}

// authenticate answers the server's security requirements: a ztn token on
// a TLS connection when the client has one, else unix (which proves
// nothing: the server treats the cache as anonymous).
func (c *conn) authenticate(sec string) error {
	protos := secProtocols(sec)
	var errs []error
	if params, ok := protos["ztn"]; ok {
		switch {
		case c.cfg.Token == nil:
			errs = append(errs, errors.New("ztn: no token configured for the cache"))
		case !c.tls:
			errs = append(errs, errors.New("ztn: the connection is not TLS (use roots://)"))
		default:
			tok, err := c.cfg.Token()
			if err != nil {
				return fmt.Errorf("kXR_auth to %s: %w: %w", c.addr, err, origin.ErrNotAuthorized)
			}
			if max, err := ztn.ParseParams(params); err == nil && len(tok) >= max {
				return fmt.Errorf("kXR_auth to %s: token of %d bytes, the server accepts less than %d: %w", c.addr, len(tok), max, origin.ErrNotAuthorized)
			}
			err = c.sendAuth("ztn", ztn.Credentials(tok))
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
	}
	if params, ok := protos["gsi"]; ok {
		if c.cfg.GSI == nil {
			errs = append(errs, errors.New("gsi: no proxy configured for the cache"))
		} else {
			err := c.authGSI(params)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
	}
	if _, ok := protos["unix"]; ok {
		name, group := "hepcache", "hepcache"
		if u, err := user.Current(); err == nil {
			name = u.Username
			if g, err := user.LookupGroupId(u.Gid); err == nil {
				group = g.Name
			}
		}
		err := c.sendAuth("unix", append([]byte("unix\x00"+name+" "+group), 0))
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("none of them is supported (ztn, gsi, unix)"))
	}
	return fmt.Errorf("kXR_login to %s: server requires authentication (%q): %w: %w", c.addr, sec, errors.Join(errs...), origin.ErrNotAuthorized)
}

// authGSI authenticates with the cache's proxy: two kXR_auth steps, the
// server's certificate verified for the host dialled.
func (c *conn) authGSI(params string) error {
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		host = c.addr
	}
	hs, cred, err := gsi.NewClientHandshake(c.cfg.GSI, strings.Trim(host, "[]"), params)
	if err != nil {
		return err
	}
	more, err := c.sendAuthStep("gsi", cred)
	if err != nil {
		return err
	}
	if more == nil {
		return errors.New("gsi: the server accepted the certificate request as a login (protocol error)")
	}
	if cred, err = hs.Next(more); err != nil {
		return err
	}
	if more, err = c.sendAuthStep("gsi", cred); err == nil && more != nil {
		_, err = hs.Next(more) // fails: no third step
	}
	return err
}

// sendAuth sends a one-step kXR_auth and reads its answer.
func (c *conn) sendAuth(credType string, cred []byte) error {
	more, err := c.sendAuthStep(credType, cred)
	if err == nil && more != nil {
		return fmt.Errorf("%s: the server wants more authentication steps, which is not supported", credType)
	}
	return err
}

// sendAuthStep sends one kXR_auth and reads its answer: nil when the
// server accepts, or the kXR_authmore body when it wants another step.
func (c *conn) sendAuthStep(credType string, cred []byte) ([]byte, error) {
	r := proto.AuthRequest{Cred: cred}
	copy(r.CredType[:], credType)
	if _, err := c.nc.Write(r.Append(nil, proto.StreamID{0, 3})); err != nil {
		return nil, fmt.Errorf("%s: %w", credType, err)
	}
	h, body, err := c.readSync()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", credType, err)
	}
	switch h.Status {
	case proto.StatusOK:
		return nil, nil
	case proto.StatusAuthMore:
		return append([]byte{}, body...), nil
	}
	return nil, fmt.Errorf("%s: %w", credType, c.syncError(h, body))
}
