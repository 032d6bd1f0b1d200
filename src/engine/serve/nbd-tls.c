/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* TLS for the NBD server: credentials, the handshake after NBD_OPT_STARTTLS,
 * and the relay between the TLS session and the socketpair the protocol
 * code reads and writes. Keys are never logged and are wiped when freed. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "nbd-tls.h"
#include "vb-error.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A keys file or private key larger than this is not one. */
#define VB_NBD_TLS_MAX_SECRET_FILE (1u << 20)
/* The relay moves at most one TLS record's plaintext per step. */
#define VB_NBD_TLS_RELAY_BUFFER (16u << 10)
/* GnuTLS leaves the PSK key exchanges out of NORMAL. */
#define VB_NBD_TLS_PSK_PRIORITY "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK"
#define VB_NBD_TLS_X509_PRIORITY "NORMAL"

struct _VbNbdTls {
  gint ref;
  VbNbdTlsMode mode;
  gnutls_priority_t priority;
  gnutls_psk_server_credentials_t psk; /* psk or x509 */
  GHashTable *keys;                    /* username -> GBytes (wiped when freed) */
  gnutls_certificate_credentials_t x509;
  gboolean verify_peer; /* x509 with a ca-cert.pem: clients need a certificate */
};

struct _VbNbdTlsLink {
  gnutls_session_t session;
  int fd;      /* the connection's socket (owned by the caller) */
  int pair[2]; /* [0] the relay's end, [1] the protocol's */
  GThread *thread;
};

/* ---- secrets ---- */

typedef struct {
  gsize len;
  guint8 data[];
} VbSecret;

static void
secret_free (gpointer p)
{
  VbSecret *s = p;

  explicit_bzero (s->data, s->len);
  g_free (s);
}

static GBytes *
secret_bytes (const guint8 *data, gsize len)
{
  VbSecret *s = g_malloc (sizeof *s + len);

  s->len = len;
  memcpy (s->data, data, len);
  return g_bytes_new_with_free_func (s->data, len, secret_free, s);
}

/* Reads a regular file (opened without blocking, so that a FIFO put in
 * its place cannot hang the caller); a @secret one must be readable by its
 * owner alone: owned by root or by whoever runs the server, with no group
 * or other bits, and its contents are wiped by the caller. */
static char *
read_checked_file (const char *path, const char *what, gboolean secret, gsize *len, GError **error)
{
  struct stat st;
  g_autofree char *buf = NULL;
  gsize got = 0;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s %s: %s"), what, path,
                   g_strerror (e));
      return NULL;
    }
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s %s is not a regular file"),
                   what, path);
      return NULL;
    }
  if (secret && ((st.st_mode & 077) != 0 || (st.st_uid != 0 && st.st_uid != geteuid ())))
    {
      close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s %s must be owned by root and readable by its owner alone "
                      "(it has mode %04o and owner %u: chown root and chmod 600 it)"),
                   what, path, (guint) (st.st_mode & 07777), (guint) st.st_uid);
      return NULL;
    }
  if (st.st_size > VB_NBD_TLS_MAX_SECRET_FILE)
    {
      close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s %s is larger than %u bytes"),
                   what, path, VB_NBD_TLS_MAX_SECRET_FILE);
      return NULL;
    }
  buf = g_malloc (st.st_size + 1);
  while (got < (gsize) st.st_size)
    {
      ssize_t n = read (fd, buf + got, st.st_size - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          int e = n < 0 ? errno : EIO;
          close (fd);
          explicit_bzero (buf, got);
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s %s: %s"), what, path,
                       g_strerror (e));
          return NULL;
        }
      got += n;
    }
  close (fd);
  buf[got] = '\0';
  *len = got;
  return g_steal_pointer (&buf);
}

static gboolean
keys_error (GError **error, const char *path, guint line, const char *why)
{
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("TLS keys file %s, line %u: %s"),
               path, line, why);
  return FALSE;
}

static gboolean
parse_key_line (GHashTable *keys, const char *path, guint line, const char *s, gsize n,
                GError **error)
{
  const char *colon = memchr (s, ':', n);
  guint8 key[VB_NBD_TLS_MAX_KEY];
  gsize ulen, hlen;
  g_autofree char *username = NULL;

  if (colon == NULL)
    return keys_error (error, path, line, _ ("expected USERNAME:HEXKEY"));
  ulen = colon - s;
  hlen = n - ulen - 1;
  if (ulen == 0 || ulen > VB_NBD_TLS_MAX_USERNAME)
    return keys_error (error, path, line, _ ("the user name must be 1 to 128 bytes"));
  for (gsize i = 0; i < ulen; i++)
    if (!g_ascii_isgraph (s[i]))
      return keys_error (error, path, line,
                         _ ("the user name must be printable ASCII without spaces"));
  if (hlen % 2 != 0 || hlen / 2 < VB_NBD_TLS_MIN_KEY || hlen / 2 > VB_NBD_TLS_MAX_KEY)
    return keys_error (error, path, line,
                       _ ("the key must be an even number of hex digits, 16 to 64 bytes"));
  for (gsize i = 0; i < hlen / 2; i++)
    {
      int hi = g_ascii_xdigit_value (colon[1 + 2 * i]);
      int lo = g_ascii_xdigit_value (colon[2 + 2 * i]);
      if (hi < 0 || lo < 0)
        {
          explicit_bzero (key, sizeof key);
          return keys_error (error, path, line, _ ("the key is not hexadecimal"));
        }
      key[i] = hi << 4 | lo;
    }
  username = g_strndup (s, ulen);
  if (g_hash_table_contains (keys, username))
    {
      explicit_bzero (key, sizeof key);
      return keys_error (error, path, line, _ ("the user name is given twice"));
    }
  g_hash_table_insert (keys, g_steal_pointer (&username), secret_bytes (key, hlen / 2));
  explicit_bzero (key, sizeof key);
  return TRUE;
}

GHashTable *
vb_nbd_tls_parse_keys (const char *path, const char *text, gsize len, GError **error)
{
  g_autoptr (GHashTable) keys
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_bytes_unref);
  gsize at = 0;
  guint line = 0;

  while (at < len)
    {
      const char *s = text + at;
      const char *nl = memchr (s, '\n', len - at);
      gsize n = nl ? (gsize) (nl - s) : len - at;

      line++;
      at += n + (nl != NULL);
      if (n > 0 && s[n - 1] == '\r')
        n--;
      if (n == 0)
        continue;
      if (memchr (s, '\0', n) != NULL)
        {
          keys_error (error, path, line, _ ("a NUL byte"));
          return NULL;
        }
      if (!parse_key_line (keys, path, line, s, n, error))
        return NULL;
    }
  if (g_hash_table_size (keys) == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("TLS keys file %s has no key"),
                   path);
      return NULL;
    }
  return g_steal_pointer (&keys);
}

/* ---- credentials ---- */

static gboolean
gnutls_failed (GError **error, int r, const char *what, const char *path)
{
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s %s: %s", what, path,
               gnutls_strerror (r));
  return FALSE;
}

static int
psk_lookup (gnutls_session_t session, const char *username, gnutls_datum_t *key)
{
  VbNbdTls *tls = gnutls_session_get_ptr (session);
  GBytes *k = g_hash_table_lookup (tls->keys, username);
  gsize n;
  const guint8 *data;

  if (k == NULL)
    return -1;
  data = g_bytes_get_data (k, &n);
  key->data = gnutls_malloc (n);
  if (key->data == NULL)
    return -1;
  memcpy (key->data, data, n);
  key->size = n;
  return 0;
}

static VbNbdTls *
tls_new (VbNbdTlsMode mode)
{
  VbNbdTls *tls = g_new0 (VbNbdTls, 1);

  tls->ref = 1;
  tls->mode = mode;
  return tls;
}

VbNbdTls *
vb_nbd_tls_new_psk (VbNbdTlsMode mode, const char *keys_file, GError **error)
{
  g_autoptr (VbNbdTls) tls = tls_new (mode);
  gsize len = 0;
  char *text;
  int r;

  g_return_val_if_fail (keys_file != NULL, NULL);
  text = read_checked_file (keys_file, _ ("TLS keys file"), TRUE, &len, error);
  if (text == NULL)
    return NULL;
  tls->keys = vb_nbd_tls_parse_keys (keys_file, text, len, error);
  explicit_bzero (text, len);
  g_free (text);
  if (tls->keys == NULL)
    return NULL;
  if ((r = gnutls_psk_allocate_server_credentials (&tls->psk)) < 0
      || (r = gnutls_priority_init (&tls->priority, VB_NBD_TLS_PSK_PRIORITY, NULL)) < 0)
    return gnutls_failed (error, r, _ ("TLS keys file"), keys_file), NULL;
  gnutls_psk_set_server_credentials_function (tls->psk, psk_lookup);
  gnutls_psk_set_server_known_dh_params (tls->psk, GNUTLS_SEC_PARAM_MEDIUM);
  return g_steal_pointer (&tls);
}

VbNbdTls *
vb_nbd_tls_new_x509 (VbNbdTlsMode mode, const char *dir, GError **error)
{
  g_autoptr (VbNbdTls) tls = tls_new (mode);
  g_autofree char *cert_path = g_build_filename (dir, "server-cert.pem", NULL);
  g_autofree char *key_path = g_build_filename (dir, "server-key.pem", NULL);
  g_autofree char *ca_path = g_build_filename (dir, "ca-cert.pem", NULL);
  g_autofree char *cert = NULL;
  gsize cert_len = 0, key_len = 0;
  char *key;
  gnutls_datum_t cert_d, key_d;
  int r;

  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("TLS certificate directory %s is not a directory"), dir);
      return NULL;
    }
  cert = read_checked_file (cert_path, _ ("TLS certificate"), FALSE, &cert_len, error);
  if (cert == NULL)
    return NULL;
  key = read_checked_file (key_path, _ ("TLS private key"), TRUE, &key_len, error);
  if (key == NULL)
    return NULL;
  if ((r = gnutls_certificate_allocate_credentials (&tls->x509)) < 0)
    {
      explicit_bzero (key, key_len);
      g_free (key);
      return gnutls_failed (error, r, _ ("TLS certificate directory"), dir), NULL;
    }
  cert_d = (gnutls_datum_t){ (unsigned char *) cert, cert_len };
  key_d = (gnutls_datum_t){ (unsigned char *) key, key_len };
  r = gnutls_certificate_set_x509_key_mem (tls->x509, &cert_d, &key_d, GNUTLS_X509_FMT_PEM);
  explicit_bzero (key, key_len);
  g_free (key);
  if (r < 0)
    return gnutls_failed (error, r, _ ("TLS certificate and key in"), dir), NULL;
  if (g_file_test (ca_path, G_FILE_TEST_EXISTS))
    {
      g_autofree char *ca = NULL;
      gsize ca_len = 0;
      gnutls_datum_t ca_d;

      ca = read_checked_file (ca_path, _ ("TLS CA certificate"), FALSE, &ca_len, error);
      if (ca == NULL)
        return NULL;
      ca_d = (gnutls_datum_t){ (unsigned char *) ca, ca_len };
      r = gnutls_certificate_set_x509_trust_mem (tls->x509, &ca_d, GNUTLS_X509_FMT_PEM);
      if (r <= 0)
        return gnutls_failed (error, r == 0 ? GNUTLS_E_NO_CERTIFICATE_FOUND : r,
                              _ ("TLS CA certificate"), ca_path),
               NULL;
      tls->verify_peer = TRUE;
    }
  gnutls_certificate_set_known_dh_params (tls->x509, GNUTLS_SEC_PARAM_MEDIUM);
  if ((r = gnutls_priority_init (&tls->priority, VB_NBD_TLS_X509_PRIORITY, NULL)) < 0)
    return gnutls_failed (error, r, _ ("TLS certificate directory"), dir), NULL;
  return g_steal_pointer (&tls);
}

VbNbdTls *
vb_nbd_tls_ref (VbNbdTls *tls)
{
  g_atomic_int_inc (&tls->ref);
  return tls;
}

void
vb_nbd_tls_unref (VbNbdTls *tls)
{
  if (tls == NULL || !g_atomic_int_dec_and_test (&tls->ref))
    return;
  if (tls->priority)
    gnutls_priority_deinit (tls->priority);
  if (tls->psk)
    gnutls_psk_free_server_credentials (tls->psk);
  if (tls->x509)
    gnutls_certificate_free_credentials (tls->x509);
  g_clear_pointer (&tls->keys, g_hash_table_unref);
  g_free (tls);
}

VbNbdTlsMode
vb_nbd_tls_mode (const VbNbdTls *tls)
{
  return tls ? tls->mode : VB_NBD_TLS_OFF;
}

/* ---- the relay ---- */

typedef struct {
  guint8 *data;
  gsize len, off;
} RelayBuffer;

static void
relay_consumed (RelayBuffer *b, gsize n)
{
  b->off += n;
  if (b->off == b->len)
    b->off = b->len = 0;
}

/* Which way GnuTLS waits on the socket after GNUTLS_E_AGAIN. */
static short
tls_wants (gnutls_session_t session)
{
  return gnutls_record_get_direction (session) ? POLLOUT : POLLIN;
}

/* The relay's state; each step below returns whether it moved anything
 * and, when it could not, adds what it waits for to the poll events. */
typedef struct {
  VbNbdTlsLink *link;
  RelayBuffer in;  /* TLS -> protocol */
  RelayBuffer out; /* protocol -> TLS */
  gboolean tls_eof, pair_eof, tls_failed;
  gboolean pair_hup; /* the protocol side has shut its end */
  gint64 deadline;   /* from the protocol side's end: the rest must be sent by then */
  short tls_ev, pair_ev;
} Relay;

static void
relay_closing (Relay *r)
{
  if (r->deadline == 0)
    r->deadline = g_get_monotonic_time () + VB_NBD_TLS_HANDSHAKE_TIMEOUT_S * G_USEC_PER_SEC;
}

/* Sends close_notify, waiting for the socket until the deadline. */
static void
relay_bye (Relay *r)
{
  for (;;)
    {
      int n = gnutls_bye (r->link->session, GNUTLS_SHUT_WR);
      struct pollfd p = { r->link->fd, 0, 0 };
      gint64 left = r->deadline - g_get_monotonic_time ();

      if (n != GNUTLS_E_AGAIN && n != GNUTLS_E_INTERRUPTED)
        return;
      if (left <= 0)
        return;
      p.events = tls_wants (r->link->session);
      if (poll (&p, 1, (int) MIN (left / 1000 + 1, G_MAXINT)) < 0 && errno != EINTR)
        return;
    }
}

static gboolean
relay_in_to_pair (Relay *r)
{
  ssize_t n = send (r->link->pair[0], r->in.data + r->in.off, r->in.len - r->in.off, MSG_NOSIGNAL);

  if (n > 0)
    {
      relay_consumed (&r->in, n);
      return TRUE;
    }
  if (n < 0 && errno == EAGAIN)
    r->pair_ev |= POLLOUT;
  else if (n < 0 && errno != EINTR)
    {
      /* nobody reads: what the client sends is dropped */
      r->in.len = r->in.off = 0;
      r->tls_eof = TRUE;
    }
  return n < 0 && errno == EINTR;
}

static gboolean
relay_in_from_tls (Relay *r)
{
  gnutls_session_t session = r->link->session;
  ssize_t n = gnutls_record_recv (session, r->in.data, VB_NBD_TLS_RELAY_BUFFER);

  if (n > 0)
    {
      r->in.len = n;
      return TRUE;
    }
  if (n == GNUTLS_E_AGAIN)
    {
      r->tls_ev |= tls_wants (session);
      return FALSE;
    }
  if (n == GNUTLS_E_REHANDSHAKE)
    gnutls_alert_send (session, GNUTLS_AL_WARNING, GNUTLS_A_NO_RENEGOTIATION);
  else if (n == 0 || gnutls_error_is_fatal (n))
    {
      /* the client closed or broke the session: the protocol side reads
       * the end of its stream */
      r->tls_eof = TRUE;
      shutdown (r->link->pair[0], SHUT_WR);
    }
  return TRUE; /* (or interrupted, or a warning alert: again) */
}

static gboolean
relay_out_to_tls (Relay *r)
{
  gnutls_session_t session = r->link->session;
  ssize_t n = gnutls_record_send (session, r->out.data + r->out.off, r->out.len - r->out.off);

  if (n > 0)
    {
      relay_consumed (&r->out, n);
      return TRUE;
    }
  if (n == GNUTLS_E_AGAIN)
    r->tls_ev |= tls_wants (session);
  else if (n != GNUTLS_E_INTERRUPTED)
    r->tls_failed = TRUE; /* the client is gone: what is left cannot reach it */
  return n == GNUTLS_E_INTERRUPTED;
}

static gboolean
relay_out_from_pair (Relay *r)
{
  ssize_t n = recv (r->link->pair[0], r->out.data, VB_NBD_TLS_RELAY_BUFFER, 0);

  if (n > 0)
    {
      r->out.len = n;
      return TRUE;
    }
  if (n < 0 && errno == EAGAIN)
    {
      r->pair_ev |= POLLIN;
      return FALSE;
    }
  if (n == 0 || errno != EINTR)
    r->pair_eof = TRUE;
  return TRUE;
}

/* Moves plaintext both ways until the protocol side has closed and all it
 * wrote is sent, or either end fails. Both sockets are non-blocking. Once
 * the protocol side has shut its end (even while a client that stopped
 * reading holds up what is left to send), the rest has until the
 * deadline. */
static gpointer
relay_main (gpointer data)
{
  Relay r = { .link = data };

  r.in.data = g_malloc (VB_NBD_TLS_RELAY_BUFFER);
  r.out.data = g_malloc (VB_NBD_TLS_RELAY_BUFFER);
  while (!r.tls_failed)
    {
      gboolean progress = FALSE;

      r.tls_ev = r.pair_ev = 0;
      if (r.in.len > 0)
        progress |= relay_in_to_pair (&r);
      if (r.in.len == 0 && !r.tls_eof)
        progress |= relay_in_from_tls (&r);
      if (r.out.len > 0)
        progress |= relay_out_to_tls (&r);
      if (r.out.len == 0 && !r.pair_eof)
        progress |= relay_out_from_pair (&r);
      if (r.pair_eof)
        relay_closing (&r);
      if (r.tls_failed)
        break;
      if (r.pair_eof && r.out.len == 0)
        {
          relay_bye (&r);
          break;
        }
      if (!progress)
        {
          /* an fd with nothing to wait for is left out: its hang-up would
           * wake the poll forever (the pair's is watched until seen) */
          short pair_ev = r.pair_ev | (r.pair_hup ? 0 : POLLRDHUP);
          struct pollfd p[2] = { { r.tls_ev ? r.link->fd : -1, r.tls_ev, 0 },
                                 { pair_ev ? r.link->pair[0] : -1, pair_ev, 0 } };
          int timeout = -1;
          if (r.deadline)
            {
              gint64 left = r.deadline - g_get_monotonic_time ();
              if (left <= 0)
                break;
              timeout = (int) MIN (left / 1000 + 1, G_MAXINT);
            }
          if (poll (p, 2, timeout) < 0 && errno != EINTR)
            break;
          if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
            {
              r.pair_hup = TRUE;
              relay_closing (&r);
            }
        }
    }
  /* the protocol side must not wait for what will not come */
  shutdown (r.link->pair[0], SHUT_RDWR);
  g_free (r.in.data);
  g_free (r.out.data);
  return NULL;
}

static int
set_nonblocking (int fd)
{
  int flags = fcntl (fd, F_GETFL);

  if (flags < 0 || fcntl (fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return -errno;
  return 0;
}

static void
link_free (VbNbdTlsLink *l)
{
  if (l->pair[0] >= 0)
    close (l->pair[0]);
  if (l->pair[1] >= 0)
    close (l->pair[1]);
  gnutls_deinit (l->session);
  g_free (l);
}

/* The TLS handshake on the blocking socket, with the NBD handshake's
 * receive timeout on it: GNUTLS_E_AGAIN means it ran out. */
static int
tls_handshake (const VbNbdTls *tls, gnutls_session_t session)
{
  gint64 deadline = g_get_monotonic_time () + VB_NBD_TLS_HANDSHAKE_TIMEOUT_S * G_USEC_PER_SEC;
  unsigned int status = 0;
  int r;

  do
    r = gnutls_handshake (session);
  while (r < 0 && !gnutls_error_is_fatal (r) && g_get_monotonic_time () < deadline);
  if (r < 0)
    {
      /* tell the client why (a wrong key: "decrypt error") before closing */
      gnutls_alert_send_appropriate (session, r);
      g_debug ("nbd: TLS handshake: %s", gnutls_strerror (r));
      return r == GNUTLS_E_AGAIN || r == GNUTLS_E_TIMEDOUT ? -ETIMEDOUT : -EACCES;
    }
  /* (the handshake verified it already; a session without a certificate
   * must not get through either) */
  if (tls->verify_peer && (gnutls_certificate_verify_peers2 (session, &status) < 0 || status != 0))
    {
      g_debug ("nbd: TLS: the client's certificate is not trusted");
      return -EACCES;
    }
  return 0;
}

int
vb_nbd_tls_link_start (const VbNbdTls *tls, int fd, VbNbdTlsLink **link, int *plain_fd)
{
  VbNbdTlsLink *l = g_new0 (VbNbdTlsLink, 1);
  int r;

  g_return_val_if_fail (tls != NULL && fd >= 0 && link != NULL && plain_fd != NULL, -EINVAL);
  l->fd = fd;
  l->pair[0] = l->pair[1] = -1;
  if ((r = gnutls_init (&l->session, GNUTLS_SERVER | GNUTLS_NO_SIGNAL)) < 0)
    {
      g_free (l);
      return -ENOMEM;
    }
  gnutls_session_set_ptr (l->session, (gpointer) tls);
  gnutls_priority_set (l->session, tls->priority);
  if (tls->psk)
    gnutls_credentials_set (l->session, GNUTLS_CRD_PSK, tls->psk);
  else
    {
      gnutls_credentials_set (l->session, GNUTLS_CRD_CERTIFICATE, tls->x509);
      if (tls->verify_peer)
        {
          gnutls_certificate_server_set_request (l->session, GNUTLS_CERT_REQUIRE);
          gnutls_session_set_verify_cert (l->session, NULL, 0);
        }
    }
  gnutls_transport_set_int (l->session, fd);
  gnutls_handshake_set_timeout (l->session, VB_NBD_TLS_HANDSHAKE_TIMEOUT_S * 1000);
  if ((r = tls_handshake (tls, l->session)) < 0)
    goto fail;
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, l->pair) < 0)
    {
      r = -errno;
      goto fail;
    }
  if ((r = set_nonblocking (fd)) < 0 || (r = set_nonblocking (l->pair[0])) < 0)
    goto fail;
  l->thread = g_thread_try_new ("vb-nbd-tls", relay_main, l, NULL);
  if (l->thread == NULL)
    {
      r = -EAGAIN;
      goto fail;
    }
  *link = l;
  *plain_fd = l->pair[1];
  return 0;
fail:
  link_free (l);
  return r;
}

void
vb_nbd_tls_link_finish (VbNbdTlsLink *link)
{
  if (link == NULL)
    return;
  shutdown (link->pair[1], SHUT_RDWR);
  g_thread_join (link->thread);
  link_free (link);
}
