#!/usr/bin/env bash
# pelican-interop.sh PELICAN_BINARY [HEPCACHE_BINARY]
#
# Runs hepcache as a cache of a real Pelican federation on loopback and checks,
# against Pelican itself, what internal/pelicantest checks against a double:
#
#   - a federation of one process, `pelican serve --module director,registry,origin`,
#     with a posix (posixv2) origin exporting /public (public reads) and /private
#     (reads with a token of the origin's issuer), Registry.RequireCacheApproval on,
#     the director sorting caches adaptively (it checks whether a cache holds an
#     object);
#   - hepcache registers (`hepcache pelican register`), says it waits for approval,
#     is approved by the registry's admin API, advertises, and the director lists it
#     with status ok and its test OK;
#   - `pelican object get` of a public object is redirected to hepcache and checks
#     its digest; a second get is a hit (one origin read in hepcache's access log);
#   - the director redirects hepcache once per object it reads (not per block); the
#     client reports the first get of an object as a miss and the second as a hit,
#     records hepcache's Server header, and gets the X-Transfer-Status trailer it asks
#     for; the hit's digests come from hepcache's bytes (no request to the origin);
#   - the private namespace is refused without a token and served with one;
#   - the director's presence check counts hepcache as holding the object (its
#     availability weight goes from 0.5 to 2);
#   - `pelican object prestage` and `pelican object evict` use hepcache's APIs;
#   - the director's Prometheus scrapes hepcache's load (the director's ioLoad);
#   - `hepcache pelican downtime add` takes hepcache out of the director's list
#     (filtered, no redirect to it) within seconds, `remove` puts it back;
#   - with the director gone for OUTAGE seconds (default 300), cached objects stay
#     readable and advertisement resumes without restarting hepcache;
#   - no secret (key, token) in hepcache's log, metrics, dashboard or status output.
#
# THIS IS THE ONE REAL COMPONENT CI MAY LACK: the Go module proxy does not serve
# Pelican and building it takes minutes, so CI runs the protocol double
# (internal/pelicantest) instead. Build Pelican from a snapshot of
# PelicanPlatform/pelican (go build -tags server,client -o pelican ./cmd with its
# go.mod) and give this script the binary. Without a binary it says so and exits 0;
# given one, it exits non-zero at the first difference ("FAIL: ..."), never skips.
#
# Needs curl, openssl, python3 and go (to build hepcache when no binary is given).
# Everything listens on 127.0.0.1. Environment: OUTAGE (seconds the director is
# gone, default 300), WORK (directory to use, default a new temporary one), KEEP=1
# (leave the processes' logs in WORK).
set -euo pipefail

PELICAN=${1:-}
if [[ -z "$PELICAN" ]]; then
	echo "pelican-interop: no Pelican binary given: skipped (this is the one real component CI may lack;"
	echo "  the protocol double internal/pelicantest is what CI runs). Usage: $0 PELICAN_BINARY [HEPCACHE_BINARY]"
	exit 0
fi
[[ -x "$PELICAN" ]] || { echo "FAIL: $PELICAN is not an executable"; exit 1; }
PELICAN=$(cd "$(dirname "$PELICAN")" && pwd)/$(basename "$PELICAN")
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUTAGE=${OUTAGE:-300}
WORK=${WORK:-$(mktemp -d /tmp/pelican-interop.XXXXXX)}
mkdir -p "$WORK"
cd "$WORK"

HEPCACHE=${2:-}
if [[ -z "$HEPCACHE" ]]; then
	(cd "$REPO" && go build -o "$WORK/hepcache" ./cmd/hepcache)
	HEPCACHE=$WORK/hepcache
fi

step() { printf '\n== %s\n' "$*"; }
ok() { printf '   ok: %s\n' "$*"; }
fail() {
	printf '   FAIL: %s\n' "$*"
	if [[ -s servers.json ]]; then echo "   the director's last server list: $(head -c 2000 servers.json)"; fi
	echo "   (logs in $WORK: pelican.log, hepcache.log, access.log)"
	KEEP=1
	exit 1
}

PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [[ "${KEEP:-}" != 1 ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for SECONDS DESCRIPTION COMMAND...: retries COMMAND every 2 s.
wait_for() {
	local limit=$1 what=$2
	shift 2
	local end=$((SECONDS + limit))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < end)) || fail "waited ${limit}s for $what"
		sleep 2
	done
}

PPORT=$(freeport)
HPORT=$(freeport)
RPORT=$(freeport)
FED=https://localhost:$PPORT
DATA=https://localhost:$HPORT
SITE=hepcache-interop
CA=$WORK/pelican/config/certificates/tlsca.pem

step "a Pelican federation on $FED: $("$PELICAN" --version | head -1)"
mkdir -p pelican/db public private
echo "hello from a real Pelican origin" >public/hello.txt
head -c 5000000 /dev/urandom >public/big.bin
head -c 2000000 /dev/urandom >public/prestaged.bin
head -c 40000000 /dev/urandom >public/large.bin
echo "secret data of the private namespace" >private/secret.txt
echo client-id >pelican/oidc-id
echo client-secret >pelican/oidc-secret
cat >pelican/pelican.yaml <<EOF
ConfigBase: $WORK/pelican/config
RuntimeDir: $WORK/pelican/run
Logging:
  Level: info
Server:
  Hostname: localhost
  WebHost: localhost
  WebPort: $PPORT
  ExternalWebUrl: $FED
  EnableUI: false
  DbLocation: $WORK/pelican/db/server.sqlite
  DatabaseBackup:
    Location: $WORK/pelican/backups
Federation:
  DiscoveryUrl: $FED
Registry:
  RequireCacheApproval: true
  RequireOriginApproval: false
Director:
  CacheSortMethod: adaptive
  CheckCachePresence: true
  CachePresenceTTL: 5s
  FilterCachesInErrorState: false
Origin:
  StorageType: posixv2
  EnableDirectReads: true
  Exports:
    - FederationPrefix: /public
      StoragePrefix: $WORK/public
      Capabilities: ["PublicReads", "Reads", "Listings"]
    - FederationPrefix: /private
      StoragePrefix: $WORK/private
      Capabilities: ["Reads", "Listings"]
Monitoring:
  DataLocation: $WORK/pelican/monitoring
OIDC:
  ClientIDFile: $WORK/pelican/oidc-id
  ClientSecretFile: $WORK/pelican/oidc-secret
EOF
PCFG=$WORK/pelican/pelican.yaml
start_pelican() {
	"$PELICAN" serve --module director,registry,origin --config "$PCFG" >>pelican.log 2>&1 &
	PELICAN_PID=$!
	PIDS+=("$PELICAN_PID")
}
start_pelican
wait_for 120 "the federation's discovery document" curl -sSf --cacert "$CA" "$FED/.well-known/pelican-configuration"
wait_for 120 "the origin's advertisement (an origin redirect)" sh -c "curl -sS -o /dev/null -w '%{http_code}' --cacert '$CA' '$FED/api/v1.0/director/origin/public/hello.txt' | grep -q 307"
ok "discovery, registry, director and origin up (pid $PELICAN_PID)"

step "hepcache's host certificate, signed by the federation's CA (its clients and director trust it)"
openssl ecparam -name prime256v1 -genkey -noout -out host.key 2>/dev/null
openssl req -new -key host.key -subj /CN=localhost -out host.csr
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf
openssl x509 -req -in host.csr -CA "$CA" -CAkey "$WORK/pelican/config/certificates/tlsca.key" -CAcreateserial -days 2 -extfile ext.cnf -out host.crt 2>/dev/null
ok "host.crt for localhost"

cat >hepcache.toml <<EOF
[server]
listen = "127.0.0.1:$RPORT"
http_listen = "127.0.0.1:$HPORT"
[cache]
dir = "$WORK/cache"
[space]
verify_checksum = "crc32c"
[log]
access_log = "$WORK/access.log"
[security]
tls_cert = "$WORK/host.crt"
tls_key = "$WORK/host.key"
origin_ca_paths = ["$CA"]
[pelican]
federation = "$FED"
site = "$SITE"
data_url = "$DATA"
advertise_interval = "10s"
EOF

step "hepcache pelican register (RequireCacheApproval: it must wait)"
"$HEPCACHE" check --config hepcache.toml
out=$("$HEPCACHE" pelican register --config hepcache.toml 2>&1) || fail "register: $out"
echo "$out" | sed 's/^/   | /'
grep -q "waiting for a federation administrator to approve it" <<<"$out" || fail "register does not say it waits for approval"
ok "registered, pending approval, said clearly"

step "hepcache serve, pending: no advertisement yet"
"$HEPCACHE" serve --config hepcache.toml >hepcache.log 2>&1 &
HEPCACHE_PID=$!
PIDS+=("$HEPCACHE_PID")
wait_for 60 "hepcache's pending-approval log line" grep -q "waits for a federation administrator to approve it" hepcache.log
curl -sS --cacert "$CA" "$DATA/metrics" | grep -q '^hepcache_pelican_pending_approval 1' || fail "metric hepcache_pelican_pending_approval is not 1"
ok "log line and metric say pending approval"
if "$HEPCACHE" pelican status --config hepcache.toml >status.txt 2>&1; then fail "status says listed while pending: $(cat status.txt)"; fi
ok "pelican status: not listed (exit status 1) while pending"

step "a federation administrator approves /caches/$SITE (the registry's admin API)"
KEYFILE=$(ls "$WORK"/pelican/config/issuer-keys/*.pem | head -1)
ADMIN=$("$PELICAN" token create --config "$PCFG" --issuer "$FED/api/v1.0/origin" --subject admin --raw-scope web_ui.access --lifetime 600 -k "$KEYFILE" "pelican://localhost:$PPORT/public" 2>/dev/null | tail -1)
curl -sS --cacert "$CA" -c jar -D whoami.hdr -o /dev/null -H "Authorization: Bearer $ADMIN" "$FED/api/v1.0/auth/whoami"
CSRF=$(grep -i '^x-csrf-token:' whoami.hdr | cut -d' ' -f2 | tr -d '\r')
ID=$(curl -sS --cacert "$CA" -H "Authorization: Bearer $ADMIN" "$FED/api/v1.0/registry_ui/namespaces" |
	python3 -c "import json,sys; print([n['id'] for n in json.load(sys.stdin) if n['prefix']=='/caches/$SITE'][0])")
curl -sSf --cacert "$CA" -b jar -X PATCH -H "Referer: $FED/view/registry/" -H "X-CSRF-Token: $CSRF" -H "Authorization: Bearer $ADMIN" \
	"$FED/api/v1.0/registry_ui/namespaces/$ID/approve" >/dev/null || fail "approval"
ok "registration $ID approved"

listed() {
	curl -sS --cacert "$CA" "$FED/api/v1.0/director_ui/servers" >servers.json 2>&1 || return 1
	python3 -c "
import json,sys
s=[x for x in json.load(open('servers.json')) if x.get('registryPrefix')=='/caches/$SITE']
sys.exit(0 if s and s[0]['serverStatus']=='ok' and s[0]['healthStatus']=='OK' else 1)"
}
step "hepcache advertises; the director lists it with status ok and its test OK"
wait_for 180 "the director to list hepcache with status ok and director test OK" listed
curl -sS --cacert "$CA" "$FED/api/v1.0/director_ui/servers" | python3 -c "
import json,sys
for s in json.load(sys.stdin):
    print('   | %-8s %-22s %-34s status=%-9s director-test=%-7s version=%s' % (s['type'], s['name'], s['url'], s['serverStatus'], s['healthStatus'], s['version']))"
"$HEPCACHE" pelican status --config hepcache.toml >status.txt 2>&1 || fail "pelican status: $(cat status.txt)"
sed 's/^/   | /' status.txt
ok "listed: status ok, director test OK"

avail() { # the availability weight the director gives hepcache for $1 (X-Pelican-Debug)
	curl -sS --cacert "$CA" -H "X-Pelican-Debug: true" ${2:+-H "Authorization: Bearer $2"} "$FED/api/v1.0/director/object$1" |
		python3 -c "import json,sys; print(json.load(sys.stdin)['serversInfo']['$DATA']['RedirectWeights']['availabilityWeight'])"
}
step "pelican object get of a public object: redirected to hepcache, digest checked"
[[ $(avail /public/big.bin) == 0.5 ]] || fail "before any read the director's presence check gives hepcache $(avail /public/big.bin), want 0.5 (not held)"
ok "presence check before the read: availability weight 0.5 (not held)"
"$PELICAN" object get --config "$PCFG" -d "pelican://localhost:$PPORT/public/big.bin" got1.bin >get1.log 2>&1 || fail "object get: $(tail -5 get1.log)"
grep -q "Attempting to download from: localhost:$HPORT" get1.log || fail "the client was not sent to hepcache: $(grep -a 'Attempting' get1.log)"
grep -qE "Checksum (md5|crc32c|crc32|sha) matches" get1.log || fail "the client did not check a digest: $(grep -ai checksum get1.log | tail -3)"
cmp -s got1.bin public/big.bin || fail "the object read through hepcache differs"
grep -a "Attempting to download from\|Checksum .* matches" get1.log | sed 's/^.*msg=/   | /' | cut -c1-150
ok "read through hepcache, digest verified by the Pelican client, bytes equal"

step "a second get is a hit: the origin read once, for the first get only"
origin_gets() { grep -a 'msg="Served Request"' pelican.log | grep -c "method=GET resource=/api/v1.0/origin/data$1 " || true; }
wait_for 30 "an Age on the held object" sh -c "curl -sSI --cacert '$CA' '$DATA/public/big.bin' | grep -qi '^age:'"
wait_for 30 "the first get's access record" grep -q '"path":"/public/big.bin".*"bytes_read":5000000' access.log
before=$(origin_gets /public/big.bin)
sleep 1 # the records of the two gets are told apart by their open time (to the second)
mark=$(date -u +%Y-%m-%dT%H:%M:%S)
"$PELICAN" object get --config "$PCFG" -d "pelican://localhost:$PPORT/public/big.bin" got2.bin >get2.log 2>&1 || fail "second get: $(tail -5 get2.log)"
cmp -s got2.bin public/big.bin || fail "the second read differs"
grep -q "had a cache hit" get2.log || fail "the client saw no cache hit (Age) on the second get"
wait_for 30 "the second get's access record" sh -c "[ \$(grep -c '\"path\":\"/public/big.bin\".*\"bytes_read\":5000000' access.log) -ge 2 ]"
python3 - "$WORK/access.log" "$mark" <<'EOF2' || fail "hepcache's access log"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"path":"/public/big.bin"' in l]
first = [r for r in recs if r["open_time"][:19] < sys.argv[2]]
second = [r for r in recs if r["open_time"][:19] >= sys.argv[2]]
print("   | first get:  %d accesses (the client probes 1 byte, then reads), %d bytes from the origin" % (len(first), sum(r["bytes_missed"] for r in first)))
print("   | second get: %d accesses, %d bytes from the cache, %d from the origin" % (len(second), sum(r["bytes_hit"] for r in second), sum(r["bytes_missed"] for r in second)))
sys.exit(0 if first and sum(r["bytes_missed"] for r in first) > 0 and second and all(r["bytes_missed"] == 0 and r["bytes_hit"] == r["bytes_read"] for r in second) else 1)
EOF2
after=$(origin_gets /public/big.bin)
echo "   | the origin's log: $before ranged GETs of /public/big.bin (hepcache's blocks) before the second get, $after after"
[[ $before -gt 0 && $after == "$before" ]] || fail "the origin was read during the second get ($before GETs before, $after after)"
ok "second get served from the cache (the client logged a hit; no origin read)"
held() { [[ $(avail "$@") == 2 ]]; }
wait_for 60 "the director's presence check to count hepcache as holding /public/big.bin (availability weight 2; its results live Director.CachePresenceTTL)" held /public/big.bin
ok "presence check after the read: availability weight 2 (the director counts hepcache as holding it)"

step "one director redirect per object; the first get a miss and the second a hit, as the client reports them"
# The director's log: "Served Request" with the resource; hepcache reads what it
# misses through the director's origin redirect.
director_redirects() { grep -a 'msg="Served Request"' pelican.log | grep -c "resource=/api/v1.0/director/origin$1 " || true; }
origin_requests() { grep -a 'msg="Served Request"' pelican.log | grep -c "resource=/api/v1.0/origin/data$1 " || true; }
[[ $(director_redirects /public/large.bin) == 0 ]] || fail "the director redirected hepcache for large.bin before any read"
"$PELICAN" object get --config "$PCFG" -d --transfer-stats stats1.json "pelican://localhost:$PPORT/public/large.bin" got5.bin >get4.log 2>&1 || fail "get of large.bin: $(tail -5 get4.log)"
cmp -s got5.bin public/large.bin || fail "large.bin read through hepcache differs"
grep -q "Attempting to download from: localhost:$HPORT" get4.log || fail "the client was not sent to hepcache for large.bin"
# A miss carries no Age (the client records a cache age of -1 and logs no hit);
# with one, even Age: 0, the client's prestage takes the object as cached
# (objectCached: age >= 0) and skips it.
grep -q "had a cache hit" get4.log && fail "the client reported the first get as a hit: $(grep -a 'had a cache' get4.log)"
wait_for 30 "the director's log of the cache's reads" sh -c "grep -a 'Served Request' '$WORK/pelican.log' | grep -q 'resource=/api/v1.0/origin/data/public/large.bin '"
sleep 2
redirects=$(director_redirects /public/large.bin)
blocks=$(( (40000000 + 1048575) / 1048576 ))
reads1=$(origin_requests /public/large.bin)
"$PELICAN" object get --config "$PCFG" -d --transfer-stats stats2.json "pelican://localhost:$PPORT/public/large.bin" got6.bin >get5.log 2>&1 || fail "second get of large.bin: $(tail -5 get5.log)"
cmp -s got6.bin public/large.bin || fail "the second read of large.bin differs"
grep -q "had a cache hit" get5.log || fail "the client did not report the second get as a hit: $(grep -a 'had a cache' get5.log)"
grep -qE "Checksum (md5|crc32c|crc32|sha) matches" get5.log || fail "the client did not check the hit's digest"
sleep 2
reads2=$(origin_requests /public/large.bin)
python3 - stats1.json stats2.json <<'EOF2' || fail "the client's transfer stats"
import json, sys
for i, f in enumerate(sys.argv[1:]):
    def results(v):  # a list of lists of results, as `--transfer-stats` writes them
        return [r for x in v for r in results(x)] if isinstance(v, list) else [v]
    a = [x for r in results(json.load(open(f))) for x in r.get("attempts", [])]
    age = a[-1]["cacheAge"]
    print("   | get %d: server %s, cache age %s, %d bytes: a %s" % (i + 1, a[-1]["serverVersion"],
          "%gs" % (age / 1e9) if age >= 0 else "none", a[-1]["transferFileBytes"], "hit" if age > 0 else "miss"))
    if not a[-1]["serverVersion"].startswith("hepcache/") or (age > 0) != (i == 1):
        sys.exit(1)
EOF2
echo "   | the director redirected hepcache $redirects time(s) for large.bin ($blocks blocks); the origin served $reads1 requests for it, none more for the hit ($reads2 after)"
[[ $redirects == 1 ]] || fail "the director redirected hepcache $redirects times for one object of $blocks blocks; want once"
[[ $reads2 == "$reads1" ]] || fail "the hit (its digests included) reached the origin: $reads1 requests before, $reads2 after"
# As the Pelican client asks; curl shows trailers of HTTP/1.1 only (the client,
# a Go program, reads them over HTTP/2 as well: TestTransferStatusOverHTTP2).
curl -sS --http1.1 --cacert "$CA" -D trailer.txt -o /dev/null -H "X-Transfer-Status: true" -H "TE: trailers" -H "X-Pelican-Timeout: 9.5s" "$DATA/public/large.bin"
grep -i '^server: hepcache/' trailer.txt >/dev/null || fail "no Server header: $(cat trailer.txt)"
grep -i '^x-transfer-status: 200: OK' trailer.txt >/dev/null || fail "no X-Transfer-Status trailer: $(cat trailer.txt)"
grep -i '^server:\|^x-transfer-status:' trailer.txt | tr -d '\r' | sed 's/^/   | /'
ok "one redirect per object, miss then hit as the client reports them, Server recorded, the trailer sent as asked, the hit's digests from hepcache"

step "the private namespace: refused without a token, served with one"
code=$(curl -sS -o refused.txt -w '%{http_code}' --cacert "$CA" "$DATA/private/secret.txt")
[[ $code == 403 ]] || fail "without a token: $code $(cat refused.txt)"
sed 's/^/   | /' refused.txt
TOKEN=$("$PELICAN" token create --config "$PCFG" --read --lifetime 1200 "pelican://localhost:$PPORT/private/secret.txt" 2>/dev/null | tail -1)
echo "$TOKEN" >token
WRONG=$("$PELICAN" token create --config "$PCFG" --read --scope-path /other --lifetime 1200 "pelican://localhost:$PPORT/private/secret.txt" 2>/dev/null | tail -1)
code=$(curl -sS -o refused2.txt -w '%{http_code}' --cacert "$CA" -H "Authorization: Bearer $WRONG" "$DATA/private/secret.txt")
[[ $code == 403 ]] || fail "with a token for another path: $code"
ok "refused without a token (403) and with a token for another path (403)"
"$PELICAN" object get --config "$PCFG" -d -t token "pelican://localhost:$PPORT/private/secret.txt" secret.txt >get3.log 2>&1 || fail "private get with a token: $(tail -5 get3.log)"
grep -q "Attempting to download from: localhost:$HPORT" get3.log || fail "the private read did not go through hepcache"
cmp -s secret.txt private/secret.txt || fail "the private object differs"
ok "served through hepcache with the token (pelican object get -t)"

step "the Pelican client's prestage and evict calls on hepcache"
[[ $(avail /public/prestaged.bin) == 0.5 ]] || fail "before the prestage the presence check gives $(avail /public/prestaged.bin), want 0.5"
"$PELICAN" object prestage --config "$PCFG" -d "pelican://localhost:$PPORT/public/prestaged.bin" >prestage.log 2>&1 || fail "object prestage: $(tail -5 prestage.log)"
grep -q "Using Pelican prestage API" prestage.log || fail "the client did not use the prestage API of hepcache: $(grep -ai prestage prestage.log | tail -3)"
grep -a "Using Pelican prestage API\|Prestage API response" prestage.log | sed 's/^.*msg=/   | /' | cut -c1-120 | head -4
wait_for 60 "the director to count the prestaged object as held" held /public/prestaged.bin
ok "pelican object prestage used hepcache's prestage API; the object is held (presence check 2)"
MODIFY=$("$PELICAN" token create --config "$PCFG" --modify --lifetime 1200 "pelican://localhost:$PPORT/private/secret.txt" 2>/dev/null | tail -1)
echo "$MODIFY" >modify-token
"$PELICAN" object evict --config "$PCFG" -d --immediate -t token "pelican://localhost:$PPORT/private/secret.txt" >evict1.log 2>&1 && fail "evict with a read-only token succeeded"
grep -qa "403\|Permission denied" evict1.log || fail "evict with a read-only token: $(tail -3 evict1.log)"
"$PELICAN" object evict --config "$PCFG" -d --immediate -t modify-token "pelican://localhost:$PPORT/private/secret.txt" >evict2.log 2>&1 || fail "object evict: $(tail -5 evict2.log)"
grep -a "Evicted" evict2.log | tail -1 | sed 's/^/   | /' | cut -c1-160
curl -sSI --cacert "$CA" -H "Authorization: Bearer $TOKEN" "$DATA/private/secret.txt" | grep -qi '^age:' && fail "the evicted object is still held (Age)"
ok "pelican object evict: refused with a read token, done with a storage.modify token; the object is no longer held"
curl -sSf --cacert "$CA" -H "Authorization: Bearer $TOKEN" -o secret2.txt "$DATA/private/secret.txt" || fail "reading the evicted private object again"
cmp -s secret2.txt private/secret.txt || fail "the private object read again differs"
wait_for 30 "the private object held again" sh -c "curl -sSI --cacert '$CA' -H 'Authorization: Bearer $TOKEN' '$DATA/private/secret.txt' | grep -qi '^age:'"
ok "read again with the token: held again"

step "a downtime set on hepcache takes it out of the director's list and back"
filtered() { # the director's filtered flag for hepcache: "True" or "False"
	curl -sS --cacert "$CA" "$FED/api/v1.0/director_ui/servers" >servers.json 2>&1 || return 1
	python3 -c "
import json
print([x for x in json.load(open('servers.json')) if x.get('registryPrefix')=='/caches/$SITE'][0].get('filtered'))"
}
redirected_to() { # where the director sends a client for $1
	curl -sS -o /dev/null -w '%{redirect_url}' --cacert "$CA" "$FED/api/v1.0/director/object$1"
}
[[ $(filtered) == False ]] || fail "hepcache filtered before any downtime"
[[ $(redirected_to /public/hello.txt) == "$DATA"* ]] || fail "before the downtime the director sends clients elsewhere: $(redirected_to /public/hello.txt)"
"$HEPCACHE" pelican downtime add --description "interop: disk swap" --config hepcache.toml | sed 's/^/   | /'
t0=$SECONDS
in_downtime() { [[ $(filtered) == True ]]; }
out_of_downtime() { [[ $(filtered) == False ]]; }
wait_for 60 "the director to filter hepcache" in_downtime
python3 -c "
import json
s=[x for x in json.load(open('servers.json')) if x.get('registryPrefix')=='/caches/$SITE'][0]
print('   | the director after %ds: filtered=%s (%s), downtimes %s' % ($SECONDS - $t0, s['filtered'], s['filteredType'], [(d['class'], d['description'], d['endTime']) for d in s['downtimes']]))"
echo "   | a client is sent to: $(curl -sS -o /dev/null -w '%{http_code} %{redirect_url}' --cacert "$CA" "$FED/api/v1.0/director/object/public/hello.txt")"
[[ $(redirected_to /public/hello.txt) != "$DATA"* ]] || fail "the director still sends clients to hepcache in downtime"
"$HEPCACHE" pelican status --config hepcache.toml >status-downtime.txt 2>&1 || true
grep -q "downtime:     IN FORCE" status-downtime.txt || fail "pelican status does not show the downtime: $(cat status-downtime.txt)"
"$HEPCACHE" pelican downtime remove all --config hepcache.toml | sed 's/^/   | /'
t0=$SECONDS
wait_for 60 "the director to take hepcache back" out_of_downtime
echo "   | back after $((SECONDS - t0))s; a client is sent to: $(redirected_to /public/hello.txt)"
[[ $(redirected_to /public/hello.txt) == "$DATA"* ]] || fail "after the downtime the director does not send clients to hepcache"
ok "in downtime the director filters hepcache and sends it no client (here 404: no other cache); after it, back"

step "the director's Prometheus scrapes hepcache's load (xrootd_server_io_total at the web URL, with a federation token)"
QUERY=$("$PELICAN" token create --config "$PCFG" --issuer "$FED/api/v1.0/origin" --subject admin --raw-scope monitoring.query --lifetime 600 -k "$KEYFILE" "pelican://localhost:$PPORT/public" 2>/dev/null | tail -1)
scraped() {
	curl -sS --cacert "$CA" -H "Authorization: Bearer $QUERY" "$FED/api/v1.0/prometheus/query?query=xrootd_server_io_total" >scrape.json 2>&1 || return 1
	python3 -c "
import json,sys
r=[x for x in json.load(open('scrape.json'))['data']['result'] if x['metric'].get('server_url')=='$DATA' and x['metric'].get('job')=='origin_cache_servers']
sys.exit(0 if r and float(r[0]['value'][1]) > 0 else 1)"
}
wait_for 180 "the director's Prometheus to hold hepcache's xrootd_server_io_total" scraped
python3 -c "
import json
for x in json.load(open('scrape.json'))['data']['result']:
    m=x['metric']
    if m.get('job') != 'origin_cache_servers':
        continue
    print('   | xrootd_server_io_total{job=%s, server_name=%s, server_type=%s} = %s' % (m.get('job'), m.get('server_name', m.get('instance')), m.get('server_type', '-'), x['value'][1]))"
ok "the director's Prometheus scraped hepcache's load (its own query API, token with monitoring.query)"

step "no secret in hepcache's log, metrics, dashboard or status"
curl -sS --cacert "$CA" "$DATA/metrics" >metrics.txt
curl -sS --cacert "$CA" "$DATA/dashboard" >dashboard.html || true
curl -sS --cacert "$CA" "$DATA/api/stats" >>dashboard.html || true
python3 - "$WORK" "$TOKEN" "$WRONG" "$ADMIN" "$MODIFY" <<'EOF' || fail "a secret shows"
import sys, glob
work, toks = sys.argv[1], sys.argv[2:]
key = open(work + "/cache/pelican/issuer.pem").read().split("\n")[1:-2]
secrets = [t.split(".")[2] for t in toks] + [k for k in key if len(k) > 20]
for f in ("hepcache.log", "metrics.txt", "dashboard.html", "status.txt"):
    text = open(work + "/" + f, errors="replace").read()
    for s in secrets:
        if s in text:
            print("   | %s shows a secret (%s...)" % (f, s[:8]))
            sys.exit(1)
print("   | %d secrets (token signatures, key lines) looked for in 4 outputs: none" % len(secrets))
EOF
ok "none"

step "the director gone for ${OUTAGE}s: cached objects stay readable, advertisement resumes without a restart"
kill -9 "$PELICAN_PID"
wait "$PELICAN_PID" 2>/dev/null || true
gone=$SECONDS
reads=0
while ((SECONDS - gone < OUTAGE)); do
	curl -sSf --cacert "$CA" -o got3.bin "$DATA/public/big.bin" || fail "a cached public object is unreadable $((SECONDS - gone))s into the outage"
	cmp -s got3.bin public/big.bin || fail "a cached object differs during the outage"
	curl -sSf --cacert "$CA" -H "Authorization: Bearer $TOKEN" -o got4.txt "$DATA/private/secret.txt" || fail "a cached private object is unreadable $((SECONDS - gone))s into the outage"
	reads=$((reads + 2))
	sleep 15
done
grep -q 'state="federation unreachable"\|state=.federation unreachable' hepcache.log || fail "hepcache did not say the federation is unreachable"
ok "$reads reads of cached objects (public, and private with the token) over ${OUTAGE}s, all good; hepcache logged the federation unreachable"
start_pelican
wait_for 120 "the federation back" curl -sSf --cacert "$CA" "$FED/.well-known/pelican-configuration"
wait_for 180 "the director to list hepcache again" listed
kill -0 "$HEPCACHE_PID" || fail "hepcache is not running"
ok "advertisement resumed; the director lists hepcache with status ok; same hepcache process (pid $HEPCACHE_PID)"
"$PELICAN" object get --config "$PCFG" "pelican://localhost:$PPORT/public/hello.txt" hello.txt >get5.log 2>&1 || fail "a get after the outage: $(tail -5 get5.log)"
cmp -s hello.txt public/hello.txt || fail "after the outage the object differs"
ok "a new object read through the federation after the outage"

printf '\nPASS: hepcache is a cache of a real Pelican federation (%s)\n' "$("$PELICAN" --version | head -1)"
