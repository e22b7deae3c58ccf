// Package pelican makes hepcache a cache of a Pelican federation (the
// OSDF): it registers the cache's key with the federation's registry,
// advertises the cache to the director every minute, keeps a federation
// token for reads from origins through the director, keeps the director's
// namespace list for authorization (package nsauth), and serves the calls
// the director and the Pelican client make on a cache (test reports, test
// file eviction, prestage, evict, the load metric). It is a plugin of the
// server, beside the cmsd subscription: the cache and the front ends know
// nothing of it.
//
// # The protocol
//
// Read from PelicanPlatform/pelican (paths below are that repository's;
// none of its code is copied) and tried against a real federation built
// from it (scripts/pelican-interop.sh):
//
//   - Discovery: GET <federation>/.well-known/pelican-configuration names
//     the director, the registry and the federation's key set
//     (config/config.go).
//   - Registration (registry/registry.go keySignChallenge): the cache sends
//     a nonce and its public key set; the registry answers its own nonce,
//     signed; the cache signs both nonces with its ECDSA P-256 key and sends
//     everything back with the prefix /caches/<site> and a server id. 201:
//     registered. Where the federation requires it
//     (Registry.RequireCacheApproval, the OSDF's default), the registration
//     then waits for an administrator: the cache says so and asks again.
//     Before registering, checkNamespaceExists says whether the prefix is
//     already registered and with this key.
//   - Advertisement (director/director.go registerServerAd): POST
//     registerCache with an ES256 token signed by the registered key (kid,
//     scope pelican.advertise, one minute, audience the director), whose
//     body is an OriginAdvertise naming the data and web URLs and the
//     namespaces the director lists (api/v2.0/director/listNamespaces). The
//     director verifies the token with the key set it fetches from the
//     registry for the prefix, and refuses an unapproved cache. 429 and 503
//     are "not now": asked again after Retry-After.
//   - Federation token (director/fed_token.go): the director trades an
//     advertisement token for a token the federation signs, with
//     storage.read scopes for the namespaces the cache may serve; origins
//     that require cache authorization accept it. It is renewed at a third
//     of its lifetime and sent on every read from an origin, which goes
//     through the director's origin redirect (api/v1.0/director/origin).
//   - Director tests (director/monitor.go, director/cache_monitor.go): the
//     director reads a test object through the cache (a public namespace,
//     /pelican/monitoring, served by the director itself), then POSTs the
//     result and, later, the eviction of the test object, each with a token
//     the federation signs (scope pelican.director_test_report).
//
// # Goroutines
//
// Start runs two: the membership loop (discover, register, wait for
// approval, advertise every AdvertiseInterval) and the federation token
// loop (from approval on). Close stops both and waits; Leave first tells
// the director the cache is shutting down. While the federation is
// unreachable the loops retry; nothing the cache serves waits for them: a
// director gone for minutes costs no hit, and the namespace list in force
// (saved in StateDir) keeps authorization working across restarts.
//
// # Secrets
//
// The key never leaves Key (its String names the file and the key id); the
// tokens are sent only in Authorization headers. Neither appears in a log
// line, an error, a metric or the status.
package pelican
