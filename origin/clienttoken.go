package origin

import "context"

type clientTokenKey struct{}

// WithClientToken returns ctx carrying a bearer token that the client
// behind the request presented and that an authorizer judged fit to pass
// on to the origin: the credential of federations whose origins authorize
// each reader themselves (a Pelican cache hands the reader's token to the
// origin, as XCache's http.header2cgi does). Origins ignore it unless
// configured to forward it (origin/http ForwardClientToken); by default
// origins only ever see the cache's own credential.
func WithClientToken(ctx context.Context, tok string) context.Context {
	if tok == "" {
		return ctx
	}
	return context.WithValue(ctx, clientTokenKey{}, tok)
}

// ClientToken returns the token WithClientToken put in ctx, "" for none.
func ClientToken(ctx context.Context) string {
	tok, _ := ctx.Value(clientTokenKey{}).(string)
	return tok
}
