#!/usr/bin/env bash
# A local certificate authority for development and tests (docs/security.md): never for production.
#
#   deploy/dev-certs.sh DIR [EXTRA_DNS_NAME...]
#
# Writes into DIR (created, mode 700):
#   ca.pem, ca-key.pem          the CA (its key signs the two below; keep it out of version control)
#   server.pem, server-key.pem  one certificate for every service, SAN 127.0.0.1, ::1, localhost, the
#                               service names (drafter, verifier, refiner, scheduler, gateway, risk, and the
#                               headless drafter-headless, verifier-headless, refiner-headless the Scheduler
#                               balances over), their Kubernetes names in the `deliberate` namespace, and
#                               EXTRA_DNS_NAMEs
#   client.pem, client-key.pem  a client certificate (CN deliberate-client): the Scheduler's to its three
#                               services, the gateway's to the Scheduler, and a user's
# Certificates last 30 days; keys are EC P-256. Needs only openssl.
set -euo pipefail

dir=${1:?usage: dev-certs.sh DIR [EXTRA_DNS_NAME...]}
shift
days=30
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"
umask 077

san="IP:127.0.0.1,IP:::1,DNS:localhost"
for service in drafter verifier refiner scheduler gateway risk drafter-headless verifier-headless refiner-headless; do
  san+=",DNS:$service,DNS:$service.deliberate,DNS:$service.deliberate.svc,DNS:$service.deliberate.svc.cluster.local"
done
for name in "$@"; do
  san+=",DNS:$name"
done

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca-key.pem
openssl req -x509 -new -key ca-key.pem -sha256 -days "$days" -subj "/CN=deliberate dev CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem

# sign NAME CN EXTENSIONS: NAME-key.pem and NAME.pem signed by the CA.
sign() {
  key "$1-key.pem"
  openssl req -new -key "$1-key.pem" -subj "/CN=$2" -out "$1.csr"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -sha256 -days "$days" \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

# serverAuth and clientAuth: a service's own certificate also serves its container HEALTHCHECK as a client.
sign server "deliberate services" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"
sign client "deliberate-client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
rm -f ca.srl
chmod 644 ca.pem server.pem client.pem
echo "wrote $(pwd)/{ca,server,client}.pem and their -key.pem files"
