#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TLS on NBD exports (vbmgr export --tls, --tls-psk, --tls-certs), driven by
# clients nobody here wrote: nbdinfo, nbdcopy (four connections), vblk's
# reference model through libnbd, and qemu-img
# speaking TLS with pre-shared keys (psktool) and X.509 (certtool); TLS is
# required on TCP by default; a plaintext client is refused where TLS is
# required, a wrong key, an unknown user and a client without a trusted
# certificate are refused; bad credentials are refused at Export with a
# message naming the file, nothing saved; no key reaches the log; a TLS
# export comes back after vblkd restarts.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

PSK_PORT=10931
X509_PORT=10932
vb_mkimg "$T/d.img" 32M
vbmgr create d --driver linear --attr metadata=none --start "$T/d.img"

vb_log "keys: psktool's format, root's alone"
psktool -u alice -p "$T/keys.psk" > /dev/null
chmod 600 "$T/keys.psk"
key=$(cut -d: -f2 "$T/keys.psk")
[ "${#key}" -ge 32 ] || vb_fail "psktool wrote a key of ${#key} hex digits"
psk_uri () { echo "nbds://${2:-alice}@127.0.0.1:$PSK_PORT/d?tls-psk-file=${1:-$T/keys.psk}"; }

vb_log "refused at Export, nothing saved: TLS on TCP without credentials, bad credentials"
vb_snapshot
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT
vb_assert_contains "$VB_ERR" "TLS is required on TCP unless tls=off is given" "TCP without TLS"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen "unix:$T/d.sock" --tls require
vb_assert_contains "$VB_ERR" "tls=require needs tls-psk" "require without credentials"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT --tls maybe \
  --tls-psk "$T/keys.psk"
vb_assert_contains "$VB_ERR" "tls 'maybe': expected off, allow or require" "unknown TLS mode"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT --tls off \
  --tls-psk "$T/keys.psk"
vb_assert_contains "$VB_ERR" "tls=off takes no credentials" "off with credentials"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT \
  --tls-psk "$T/keys.psk" --tls-certs "$T"
vb_assert_contains "$VB_ERR" "give tls-psk or tls-certs, not both" "both credentials"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT \
  --tls-psk "$T/no-such.psk"
vb_assert_contains "$VB_ERR" "TLS keys file $T/no-such.psk: No such file or directory" "missing keys file"
cp "$T/keys.psk" "$T/open.psk"
chmod 644 "$T/open.psk"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT \
  --tls-psk "$T/open.psk"
vb_assert_contains "$VB_ERR" "TLS keys file $T/open.psk must be owned by root and readable by its owner alone (it has mode 0644" \
  "keys file readable by others"
{ cat "$T/keys.psk"; echo "bob:not-hex-at-all-not-hex-at-all"; } > "$T/bad.psk"
chmod 600 "$T/bad.psk"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT \
  --tls-psk "$T/bad.psk"
vb_assert_contains "$VB_ERR" "TLS keys file $T/bad.psk, line 2: the key must be an even number of hex digits" \
  "keys file with a bad line"
printf 'alice:%s\nalice:%s\n' "$key" "$key" > "$T/twice.psk"
chmod 600 "$T/twice.psk"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT \
  --tls-psk "$T/twice.psk"
vb_assert_contains "$VB_ERR" "line 2: the user name is given twice" "a user twice"
printf 'carol:00112233\n' > "$T/short.psk"
chmod 600 "$T/short.psk"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT \
  --tls-psk "$T/short.psk"
vb_assert_contains "$VB_ERR" "line 1: the key must be an even number of hex digits, 16 to 64 bytes" "a short key"
mkdir -m 700 "$T/nocerts"
vb_expect_fail InvalidArgument vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT \
  --tls-certs "$T/nocerts"
vb_assert_contains "$VB_ERR" "server-cert.pem" "certificate directory without a certificate"
vb_assert_unchanged "refused exports"

vb_log "PSK, required on TCP: nbdinfo, nbdcopy, the reference model and qemu-img over TLS"
vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT --tls-psk "$T/keys.psk"
vb_assert_eq "nbd tcp:127.0.0.1:$PSK_PORT tls=require tls-psk=$T/keys.psk" "$(vb_json d '.exports[0]')" \
  "the export as saved"
vb_assert_eq $((32 << 20)) "$(nbdinfo --size "$(psk_uri)")" "nbdinfo --size over TLS"
nbdinfo --json "$(psk_uri)" > "$T/info.json" || vb_fail "nbdinfo --json over TLS"
vb_assert_eq true "$(jq '.TLS' "$T/info.json")" "nbdinfo says TLS was negotiated"
head -c 32M /dev/urandom > "$T/random"
nbdcopy "$T/random" "$(psk_uri)" || vb_fail "nbdcopy into the export over TLS"
nbdcopy "$(psk_uri)" "$T/back" || vb_fail "nbdcopy out of the export over TLS"
cmp "$T/random" "$T/back" || vb_fail "nbdcopy round trip over TLS"
cmp "$T/random" "$T/d.img" || vb_fail "the image after nbdcopy over TLS"
# (fio's nbd engine cannot: libnbd refuses tls-psk-file in a URI unless allowed)
out=$("$VB_REFMODEL" --nbd "$(psk_uri)" --ops 1500 --chunk 262144 --seed "$RANDOM") ||
  vb_fail "the reference model over TLS: $out"
vb_log "reference model over TLS: $out"
mkdir -m 700 "$T/qemu-psk"
cp "$T/keys.psk" "$T/qemu-psk/keys.psk"
qemu_psk=(--object "tls-creds-psk,id=tls0,endpoint=client,dir=$T/qemu-psk,username=alice")
qemu_img="driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$PSK_PORT,export=d,tls-creds=tls0"
qemu-img convert "${qemu_psk[@]}" --image-opts "$qemu_img" -O raw "$T/qemu.raw" ||
  vb_fail "qemu-img convert over TLS"
cmp "$T/qemu.raw" "$T/d.img" || vb_fail "qemu-img convert over TLS: content"

vb_log "PSK: a plaintext client, a wrong key and an unknown user are refused"
out=$(nbdinfo --size nbd://127.0.0.1:$PSK_PORT/d 2>&1) && vb_fail "a plaintext client got in: $out"
vb_assert_contains "$out" "TLS" "what the plaintext client hears"
vb_log "plaintext: $out"
psktool -u alice -p "$T/other.psk" > /dev/null
chmod 600 "$T/other.psk"
out=$(nbdinfo --size "$(psk_uri "$T/other.psk")" 2>&1) && vb_fail "a wrong key got in: $out"
vb_log "wrong key: $out"
psktool -u bob -p "$T/bob.psk" > /dev/null
out=$(nbdinfo --size "$(psk_uri "$T/bob.psk" bob)" 2>&1) && vb_fail "an unknown user got in: $out"
# qemu-img, plaintext, against the TLS-only export
out=$(qemu-img info --image-opts "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$PSK_PORT,export=d" 2>&1) &&
  vb_fail "qemu-img got in without TLS: $out"
vb_pid_alive "$VBLKD_PID" || vb_fail "vblkd died under refused clients"
vb_assert_eq $((32 << 20)) "$(nbdinfo --size "$(psk_uri)")" "nbdinfo after the refused clients"

vb_log "X.509, allowed (not required) on TCP: a client certificate signed by the CA is required"
mkdir -m 700 "$T/ca" "$T/srv" "$T/cli" "$T/cli-nocert"
cat > "$T/ca/ca.info" << EOF
cn = vblk test CA
ca
cert_signing_key
expiration_days = 2
EOF
cat > "$T/srv/srv.info" << EOF
cn = localhost
dns_name = localhost
ip_address = 127.0.0.1
tls_www_server
encryption_key
signing_key
expiration_days = 2
EOF
cat > "$T/cli/cli.info" << EOF
cn = vblk test client
tls_www_client
encryption_key
signing_key
expiration_days = 2
EOF
certtool --generate-privkey --outfile "$T/ca/ca-key.pem" 2> /dev/null
certtool --generate-self-signed --load-privkey "$T/ca/ca-key.pem" --template "$T/ca/ca.info" \
  --outfile "$T/ca/ca-cert.pem" 2> /dev/null
for who in srv cli; do
  name=server; [ "$who" = cli ] && name=client
  certtool --generate-privkey --outfile "$T/$who/$name-key.pem" 2> /dev/null
  certtool --generate-certificate --load-privkey "$T/$who/$name-key.pem" \
    --load-ca-certificate "$T/ca/ca-cert.pem" --load-ca-privkey "$T/ca/ca-key.pem" \
    --template "$T/$who/$who.info" --outfile "$T/$who/$name-cert.pem" 2> /dev/null
  cp "$T/ca/ca-cert.pem" "$T/$who/"
done
cp "$T/ca/ca-cert.pem" "$T/cli-nocert/"
chmod 600 "$T/srv/server-key.pem" "$T/cli/client-key.pem"
vbmgr export d --nbd --listen tcp:127.0.0.1:$X509_PORT --tls allow --tls-certs "$T/srv"
vb_assert_eq "nbd tcp:127.0.0.1:$X509_PORT tls=allow tls-certs=$T/srv" "$(vb_json d '.exports[1]')" \
  "the X.509 export as saved"
x509_uri="nbds://localhost:$X509_PORT/d?tls-certificates=$T/cli"
vb_assert_eq $((32 << 20)) "$(nbdinfo --size "$x509_uri")" "nbdinfo over X.509 TLS"
nbdcopy "$x509_uri" "$T/back-x509" || vb_fail "nbdcopy over X.509 TLS"
cmp "$T/back-x509" "$T/d.img" || vb_fail "nbdcopy over X.509 TLS: content"
qemu-img convert --object "tls-creds-x509,id=tls1,endpoint=client,dir=$T/cli" \
  --image-opts "driver=nbd,server.type=inet,server.host=localhost,server.port=$X509_PORT,export=d,tls-creds=tls1" \
  -O raw "$T/qemu-x509.raw" || vb_fail "qemu-img convert over X.509 TLS"
cmp "$T/qemu-x509.raw" "$T/d.img" || vb_fail "qemu-img over X.509 TLS: content"
vb_assert_eq $((32 << 20)) "$(nbdinfo --size nbd://127.0.0.1:$X509_PORT/d)" \
  "a plaintext client where TLS is allowed, not required"
out=$(nbdinfo --size "nbds://localhost:$X509_PORT/d?tls-certificates=$T/cli-nocert" 2>&1) &&
  vb_fail "a client without a certificate got in: $out"
vb_log "no client certificate: $out"

vb_log "no key in vblkd's log; TLS exports come back after a restart"
vb_assert_not_contains "$(cat "$VB_LOG")" "$key" "vblkd's log"
vb_stop_daemon
vb_start_daemon
vb_wait_state d active 30 || vb_fail "d is not active after the restart"
vb_wait_until 30 nbdinfo --size "$(psk_uri)" > /dev/null || vb_fail "the PSK export after the restart"
vb_assert_eq $((32 << 20)) "$(nbdinfo --size "$x509_uri")" "the X.509 export after the restart"
out=$(nbdinfo --size nbd://127.0.0.1:$PSK_PORT/d 2>&1) && vb_fail "plaintext got in after the restart: $out"

vb_log "--stop finds a TLS export by its address"
vbmgr export d --nbd --listen tcp:127.0.0.1:$PSK_PORT --stop
vb_assert_eq "nbd tcp:127.0.0.1:$X509_PORT tls=allow tls-certs=$T/srv" "$(vb_json d '.exports | join(",")')" \
  "exports after --stop"
! nbdinfo --size "$(psk_uri)" > /dev/null 2>&1 || vb_fail "the PSK export answers after --stop"
vb_log "a unix socket path with a space: one export, found again by its whole address"
vbmgr export d --nbd --listen "unix:$T/with space.sock"
vb_expect_fail AlreadyExists vbmgr export d --nbd --listen "unix:$T/with space.sock"
vb_wait_until 10 nbdinfo --size "nbd+unix:///d?socket=$T/with%20space.sock" > /dev/null ||
  vb_fail "the export on a path with a space does not answer"
vbmgr export d --nbd --listen "unix:$T/with space.sock" --stop
vb_assert_eq 1 "$(vb_json d '.exports | length')" "exports after stopping the one with a space"
vbmgr stop d
vb_stop_daemon
