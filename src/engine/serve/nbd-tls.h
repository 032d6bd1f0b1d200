/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* TLS for the NBD server (GnuTLS), as qemu-nbd and nbdkit offer it: a
 * listener's credentials (pre-shared keys from a keys file, or an X.509
 * certificate directory) and whether it allows or requires NBD_OPT_STARTTLS.
 * After the TLS handshake a relay thread carries the session's plaintext
 * over a socketpair, so the protocol code (handshake, transmission on its
 * ring) reads and writes a plain socket and never sees a record. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  VB_NBD_TLS_OFF,     /* STARTTLS refused */
  VB_NBD_TLS_ALLOW,   /* plaintext, or TLS when the client asks */
  VB_NBD_TLS_REQUIRE, /* every option but STARTTLS and ABORT refused before TLS */
} VbNbdTlsMode;

/* Keys of a keys file: at least this long (psktool makes 32 bytes). */
#define VB_NBD_TLS_MIN_KEY 16u
#define VB_NBD_TLS_MAX_KEY 64u
#define VB_NBD_TLS_MAX_USERNAME 128u
/* A TLS handshake, like the NBD one, must end within this. */
#define VB_NBD_TLS_HANDSHAKE_TIMEOUT_S 30

typedef struct _VbNbdTls VbNbdTls;

/* Parses @text of a keys file (psktool's format: one USERNAME:HEXKEY per
 * line) into username -> GBytes. Errors name @path and the line, never a
 * key. Exposed for the unit tests. */
GHashTable *vb_nbd_tls_parse_keys (const char *path, const char *text, gsize len, GError **error);

/* Credentials from a keys file, which must be a regular file that only its
 * owner (root, or the user running the server) can read or write. */
VbNbdTls *vb_nbd_tls_new_psk (VbNbdTlsMode mode, const char *keys_file, GError **error);

/* Credentials from a directory holding server-cert.pem and server-key.pem
 * (the key readable by its owner alone); with a ca-cert.pem there too,
 * clients must present a certificate it signed. */
VbNbdTls *vb_nbd_tls_new_x509 (VbNbdTlsMode mode, const char *dir, GError **error);

VbNbdTls *vb_nbd_tls_ref (VbNbdTls *tls);
void vb_nbd_tls_unref (VbNbdTls *tls);
VbNbdTlsMode vb_nbd_tls_mode (const VbNbdTls *tls);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbNbdTls, vb_nbd_tls_unref)

/* One connection's TLS session and its relay. */
typedef struct _VbNbdTlsLink VbNbdTlsLink;

/* Runs the TLS handshake on the blocking socket @fd (bounded by
 * VB_NBD_TLS_HANDSHAKE_TIMEOUT_S) and starts the relay: *@plain_fd is the
 * socket carrying the session's plaintext from then on. Returns 0 or
 * -errno (-EACCES: the client's key or certificate was refused). */
int vb_nbd_tls_link_start (const VbNbdTls *tls, int fd, VbNbdTlsLink **link, int *plain_fd);

/* Ends the plaintext side, lets the relay send what was written before
 * (bounded by VB_NBD_TLS_HANDSHAKE_TIMEOUT_S when the peer stops reading)
 * and close the session, joins it and closes the socketpair. @fd itself
 * stays open. */
void vb_nbd_tls_link_finish (VbNbdTlsLink *link);

G_END_DECLS
