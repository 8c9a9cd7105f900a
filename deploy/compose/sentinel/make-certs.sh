#!/bin/sh
# Makes the private CA and the one server certificate the Sentinel + TLS
# setup uses (deploy/README.md, "Sentinel and TLS"), in ../secrets/redis-tls/.
# Run once, from anywhere, before the first `up`. Needs the openssl CLI.
# The certificate names every Redis and sentinel service (the sentinels
# announce host names, so clients verify those) and is also the client
# certificate the replicas and sentinels show each other.
set -eu
out="$(cd "$(dirname "$0")/.." && pwd)/secrets/redis-tls"
mkdir -p "$out"
cd "$out"
if [ -e ca.crt ]; then
  echo "$out/ca.crt exists; remove $out to make new certificates" >&2
  exit 1
fi
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -keyout ca.key -out ca.crt -days 825 -subj "/CN=lockfleet compose Redis CA"
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -keyout server.key -out server.csr -subj "/CN=redis"
cat > server.ext <<'EXT'
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:redis-primary, DNS:redis-replica-1, DNS:redis-replica-2, DNS:sentinel-1, DNS:sentinel-2, DNS:sentinel-3, DNS:localhost, IP:127.0.0.1
EXT
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -out server.crt -days 825 -extfile server.ext
rm -f server.csr server.ext ca.srl
# Redis runs as uid 999 in the image and must read the key.
chmod 0644 ca.crt server.crt server.key
echo "made $out/{ca.crt,server.crt,server.key}"
