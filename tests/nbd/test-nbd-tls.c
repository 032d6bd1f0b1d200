/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* TLS of the NBD server without a client program: the keys file's parser
 * and its permission checks, and sessions of a GnuTLS client written here
 * against a listener that requires TLS (every option but STARTTLS refused
 * before it, what was negotiated before forgotten, data both ways through
 * the relay), that allows it, and that does not offer it; a wrong key is
 * refused. The real clients (nbdinfo, nbdcopy, qemu-img) are in
 * tests/integration/test-nbd-tls.sh. */
#include "config.h"

#include "nbd-server.h"
#include "nbd-tls.h"
#include "vb-error.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define DISK_SIZE (1u << 20)
#define KEY_HEX "00112233445566778899aabbccddeeff"
#define OPTS_MAGIC G_GUINT64_CONSTANT (0x49484156454f5054)
#define OPT_GO 7u
#define OPT_STARTTLS 5u
#define OPT_STRUCTURED_REPLY 8u
#define REP_ACK 1u
#define REP_INFO 3u
#define REP_ERR_UNSUP ((1u << 31) + 1)
#define REP_ERR_INVALID ((1u << 31) + 3)
#define REP_ERR_TLS_REQD ((1u << 31) + 5)

/* ---- the keys file ---- */

static void
assert_keys_refused (const char *text, const char *message)
{
  g_autoptr (GError) error = NULL;

  g_assert_null (vb_nbd_tls_parse_keys ("/k", text, strlen (text), &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
  g_assert_null (strstr (error->message, KEY_HEX));
}

static void
test_keys_parse (void)
{
  const char *text = "alice:" KEY_HEX "\r\n\nbob:" KEY_HEX KEY_HEX "\n";
  g_autoptr (GHashTable) keys = vb_nbd_tls_parse_keys ("/k", text, strlen (text), NULL);
  GBytes *alice, *bob;

  g_assert_nonnull (keys);
  g_assert_cmpuint (g_hash_table_size (keys), ==, 2);
  alice = g_hash_table_lookup (keys, "alice");
  bob = g_hash_table_lookup (keys, "bob");
  g_assert_cmpuint (g_bytes_get_size (alice), ==, 16);
  g_assert_cmpuint (g_bytes_get_size (bob), ==, 32);
  g_assert_cmpuint (((const guint8 *) g_bytes_get_data (alice, NULL))[15], ==, 0xff);

  assert_keys_refused ("", "TLS keys file /k has no key");
  assert_keys_refused ("\n\n", "TLS keys file /k has no key");
  assert_keys_refused ("alice " KEY_HEX "\n", "TLS keys file /k, line 1: expected USERNAME:HEXKEY");
  assert_keys_refused ("a:" KEY_HEX "\n:" KEY_HEX,
                       "TLS keys file /k, line 2: the user name must be 1 to 128 bytes");
  assert_keys_refused ("a b:" KEY_HEX, "TLS keys file /k, line 1: the user name must be "
                                       "printable ASCII without spaces");
  assert_keys_refused ("a:" KEY_HEX "0", "TLS keys file /k, line 1: the key must be an even "
                                         "number of hex digits, 16 to 64 bytes");
  assert_keys_refused ("a:0011223344556677", "TLS keys file /k, line 1: the key must be an even "
                                             "number of hex digits, 16 to 64 bytes");
  assert_keys_refused ("a:" KEY_HEX KEY_HEX KEY_HEX KEY_HEX "00",
                       "TLS keys file /k, line 1: the key must be an even number of hex digits, "
                       "16 to 64 bytes");
  assert_keys_refused ("a:00112233445566778899aabbccddeefg",
                       "TLS keys file /k, line 1: the key is not hexadecimal");
  assert_keys_refused ("a:" KEY_HEX "\nb:" KEY_HEX "\na:" KEY_HEX,
                       "TLS keys file /k, line 3: the user name is given twice");
  {
    static const char nul[] = "a:" KEY_HEX "\nb\0:" KEY_HEX;
    g_autoptr (GError) error = NULL;
    g_assert_null (vb_nbd_tls_parse_keys ("/k", nul, sizeof nul - 1, &error));
    g_assert_cmpstr (error->message, ==, "TLS keys file /k, line 2: a NUL byte");
  }
}

static char *
write_keys (const char *dir, const char *name, const char *text, int mode)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_NONE, mode, NULL));
  g_assert_cmpint (chmod (path, mode), ==, 0);
  return g_steal_pointer (&path);
}

static void
test_keys_file_mode (void)
{
  g_autofree char *dir = g_dir_make_tmp ("test-nbd-tls-XXXXXX", NULL);
  g_autofree char *open_path = write_keys (dir, "open.psk", "a:" KEY_HEX "\n", 0640);
  g_autofree char *ok_path = write_keys (dir, "ok.psk", "a:" KEY_HEX "\n", 0600);
  g_autofree char *message = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VbNbdTls) tls = NULL;

  g_assert_null (vb_nbd_tls_new_psk (VB_NBD_TLS_REQUIRE, open_path, &error));
  message = g_strdup_printf ("TLS keys file %s must be owned by root and readable by its owner "
                             "alone (it has mode 0640 and owner %u: chown root and chmod 600 it)",
                             open_path, (guint) geteuid ());
  g_assert_cmpstr (error->message, ==, message);
  g_clear_error (&error);
  g_assert_null (vb_nbd_tls_new_psk (VB_NBD_TLS_REQUIRE, dir, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "is not a regular file"));
  g_clear_error (&error);
  g_assert_null (vb_nbd_tls_new_x509 (VB_NBD_TLS_REQUIRE, ok_path, &error));
  g_assert_nonnull (strstr (error->message, "is not a directory"));
  g_clear_error (&error);

  tls = vb_nbd_tls_new_psk (VB_NBD_TLS_ALLOW, ok_path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (vb_nbd_tls_mode (tls), ==, VB_NBD_TLS_ALLOW);
  unlink (open_path);
  unlink (ok_path);
  rmdir (dir);
}

/* ---- sessions ---- */

typedef struct {
  GMutex lock;
  guint8 data[DISK_SIZE];
} Disk;

static guint64
disk_size (void *handle)
{
  return DISK_SIZE;
}

static int
disk_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  Disk *d = handle;

  g_mutex_lock (&d->lock);
  memcpy (buf, d->data + offset, length);
  g_mutex_unlock (&d->lock);
  return 0;
}

static int
disk_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  Disk *d = handle;

  g_mutex_lock (&d->lock);
  memcpy (d->data + offset, buf, length);
  g_mutex_unlock (&d->lock);
  return 0;
}

static const VbBlockOps disk_ops
    = { .size = disk_size, .pread = disk_pread, .pwrite = disk_pwrite };

/* The client's end: plain until TLS is started on it. */
typedef struct {
  int fd;
  gnutls_session_t tls;
  gnutls_psk_client_credentials_t cred;
} Chan;

static void
chan_send (Chan *c, const void *buf, gsize len)
{
  const guint8 *p = buf;

  while (len > 0)
    {
      ssize_t n = c->tls ? gnutls_record_send (c->tls, p, len) : send (c->fd, p, len, MSG_NOSIGNAL);
      g_assert_cmpint (n, >, 0);
      p += n;
      len -= n;
    }
}

static void
chan_recv (Chan *c, void *buf, gsize len)
{
  guint8 *p = buf;

  while (len > 0)
    {
      ssize_t n = c->tls ? gnutls_record_recv (c->tls, p, len) : recv (c->fd, p, len, 0);
      g_assert_cmpint (n, >, 0);
      p += n;
      len -= n;
    }
}

static void
put32 (guint8 *p, guint32 v)
{
  v = GUINT32_TO_BE (v);
  memcpy (p, &v, 4);
}

static guint32
get32 (const guint8 *p)
{
  guint32 v;
  memcpy (&v, p, 4);
  return GUINT32_FROM_BE (v);
}

static void
send_option (Chan *c, guint32 option, const void *data, guint32 len)
{
  guint8 h[16];
  guint64 magic = GUINT64_TO_BE (OPTS_MAGIC);

  memcpy (h, &magic, 8);
  put32 (h + 8, option);
  put32 (h + 12, len);
  chan_send (c, h, sizeof h);
  if (len)
    chan_send (c, data, len);
}

/* The type of the final reply to @option (informational ones skipped). */
static guint32
option_reply (Chan *c, guint32 option)
{
  for (;;)
    {
      guint8 h[20];
      guint32 type, len;
      g_autofree guint8 *data = NULL;

      chan_recv (c, h, sizeof h);
      g_assert_cmpuint (get32 (h + 8), ==, option);
      type = get32 (h + 12);
      len = get32 (h + 16);
      data = g_malloc (len + 1);
      chan_recv (c, data, len);
      if (type != REP_INFO)
        return type;
    }
}

static Chan
chan_connect (const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  guint8 greeting[18], flags[4];
  Chan c = { socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) };

  struct timeval tv = { .tv_sec = 30 }; /* a server that hangs fails the test */

  setsockopt (c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  g_strlcpy (sa.sun_path, path, sizeof sa.sun_path);
  g_assert_cmpint (connect (c.fd, (struct sockaddr *) &sa, sizeof sa), ==, 0);
  chan_recv (&c, greeting, sizeof greeting);
  put32 (flags, 3); /* fixed newstyle, no zeroes */
  chan_send (&c, flags, sizeof flags);
  return c;
}

/* NBD_OPT_STARTTLS, then a TLS handshake with @key_hex as alice's key. */
static int
chan_starttls (Chan *c, const char *key_hex)
{
  gnutls_datum_t key = { (unsigned char *) key_hex, strlen (key_hex) };
  int r;

  send_option (c, OPT_STARTTLS, NULL, 0);
  g_assert_cmpuint (option_reply (c, OPT_STARTTLS), ==, REP_ACK);
  g_assert_cmpint (gnutls_psk_allocate_client_credentials (&c->cred), ==, 0);
  g_assert_cmpint (gnutls_psk_set_client_credentials (c->cred, "alice", &key, GNUTLS_PSK_KEY_HEX),
                   ==, 0);
  g_assert_cmpint (gnutls_init (&c->tls, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL), ==, 0);
  g_assert_cmpint (gnutls_priority_set_direct (c->tls, "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK", NULL), ==,
                   0);
  gnutls_credentials_set (c->tls, GNUTLS_CRD_PSK, c->cred);
  gnutls_transport_set_int (c->tls, c->fd);
  do
    r = gnutls_handshake (c->tls);
  while (r < 0 && !gnutls_error_is_fatal (r));
  return r;
}

static void
chan_close (Chan *c)
{
  if (c->tls)
    {
      gnutls_bye (c->tls, GNUTLS_SHUT_WR);
      gnutls_deinit (c->tls);
      gnutls_psk_free_client_credentials (c->cred);
    }
  close (c->fd);
}

static void
send_go (Chan *c)
{
  guint8 go[4 + 1 + 2] = { 0, 0, 0, 1, 'x', 0, 0 };

  send_option (c, OPT_GO, go, sizeof go);
}

/* One simple request and its reply: a write of @len bytes of @buf, or a
 * read of them into @buf. */
static void
request (Chan *c, guint16 type, guint64 offset, guint32 len, guint8 *buf)
{
  guint8 h[28] = { 0 }, reply[16];
  guint64 off = GUINT64_TO_BE (offset);
  guint16 t = GUINT16_TO_BE (type);

  put32 (h, 0x25609513);
  memcpy (h + 6, &t, 2);
  memcpy (h + 8, "cookie!!", 8);
  memcpy (h + 16, &off, 8);
  put32 (h + 24, len);
  chan_send (c, h, sizeof h);
  if (type == 1)
    chan_send (c, buf, len);
  chan_recv (c, reply, sizeof reply);
  g_assert_cmpuint (get32 (reply), ==, 0x67446698);
  g_assert_cmpuint (get32 (reply + 4), ==, 0);
  g_assert_cmpmem (reply + 8, 8, "cookie!!", 8);
  if (type == 0)
    chan_recv (c, buf, len);
}

typedef struct {
  char *dir, *path, *keys;
  Disk *disk;
  VbNbdServer *server;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer mode)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbNbdTls) tls = NULL;
  g_autofree char *address = NULL;

  f->dir = g_dir_make_tmp ("test-nbd-tls-XXXXXX", NULL);
  f->path = g_build_filename (f->dir, "s.sock", NULL);
  f->keys = write_keys (f->dir, "keys.psk", "alice:" KEY_HEX "\n", 0600);
  f->disk = g_new0 (Disk, 1);
  g_mutex_init (&f->disk->lock);
  f->server = vb_nbd_server_new ("x", NULL, &disk_ops, f->disk, &error);
  g_assert_no_error (error);
  if (GPOINTER_TO_INT (mode) != VB_NBD_TLS_OFF)
    {
      tls = vb_nbd_tls_new_psk (GPOINTER_TO_INT (mode), f->keys, &error);
      g_assert_no_error (error);
    }
  address = g_strconcat ("unix:", f->path, NULL);
  g_assert_true (vb_nbd_server_listen (f->server, address, tls, &error));
}

static void
fixture_teardown (Fixture *f, gconstpointer mode)
{
  vb_nbd_server_free (f->server);
  g_mutex_clear (&f->disk->lock);
  g_free (f->disk);
  unlink (f->keys);
  rmdir (f->dir);
  g_free (f->keys);
  g_free (f->path);
  g_free (f->dir);
}

static void
test_required (Fixture *f, gconstpointer mode)
{
  Chan c = chan_connect (f->path);
  Chan wrong;
  g_autofree guint8 *out = g_malloc (DISK_SIZE / 2), *back = g_malloc (DISK_SIZE / 2);

  /* before TLS: refused, and STARTTLS takes no data */
  send_go (&c);
  g_assert_cmpuint (option_reply (&c, OPT_GO), ==, REP_ERR_TLS_REQD);
  send_option (&c, OPT_STRUCTURED_REPLY, NULL, 0);
  g_assert_cmpuint (option_reply (&c, OPT_STRUCTURED_REPLY), ==, REP_ERR_TLS_REQD);
  send_option (&c, OPT_STARTTLS, "x", 1);
  g_assert_cmpuint (option_reply (&c, OPT_STARTTLS), ==, REP_ERR_INVALID);
  g_assert_cmpint (chan_starttls (&c, KEY_HEX), ==, 0);

  /* in TLS: once only; then the export, and data both ways through the
   * relay in pieces larger than a record */
  send_option (&c, OPT_STARTTLS, NULL, 0);
  g_assert_cmpuint (option_reply (&c, OPT_STARTTLS), ==, REP_ERR_INVALID);
  send_go (&c);
  g_assert_cmpuint (option_reply (&c, OPT_GO), ==, REP_ACK);
  for (guint i = 0; i < DISK_SIZE / 2; i++)
    out[i] = g_random_int ();
  request (&c, 1, 4096, DISK_SIZE / 2, out);
  request (&c, 0, 4096, DISK_SIZE / 2, back);
  g_assert_cmpmem (back, DISK_SIZE / 2, out, DISK_SIZE / 2);
  g_assert_cmpmem (f->disk->data + 4096, DISK_SIZE / 2, out, DISK_SIZE / 2);
  chan_close (&c);

  /* a wrong key does not get through the handshake */
  wrong = chan_connect (f->path);
  g_assert_cmpint (chan_starttls (&wrong, "ffeeddccbbaa99887766554433221100"), <, 0);
  chan_close (&wrong);
}

static void
test_allowed (Fixture *f, gconstpointer mode)
{
  Chan plain = chan_connect (f->path), tls = chan_connect (f->path);
  guint8 buf[512];

  send_go (&plain);
  g_assert_cmpuint (option_reply (&plain, OPT_GO), ==, REP_ACK);
  request (&plain, 0, 0, sizeof buf, buf);
  chan_close (&plain);
  g_assert_cmpint (chan_starttls (&tls, KEY_HEX), ==, 0);
  send_go (&tls);
  g_assert_cmpuint (option_reply (&tls, OPT_GO), ==, REP_ACK);
  request (&tls, 0, 0, sizeof buf, buf);
  chan_close (&tls);
}

static void
test_not_offered (Fixture *f, gconstpointer mode)
{
  Chan c = chan_connect (f->path);

  send_option (&c, OPT_STARTTLS, NULL, 0);
  g_assert_cmpuint (option_reply (&c, OPT_STARTTLS), ==, REP_ERR_UNSUP);
  send_go (&c);
  g_assert_cmpuint (option_reply (&c, OPT_GO), ==, REP_ACK);
  chan_close (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nbd-tls/keys/parse", test_keys_parse);
  g_test_add_func ("/nbd-tls/keys/file-mode", test_keys_file_mode);
  g_test_add ("/nbd-tls/session/required", Fixture, GINT_TO_POINTER (VB_NBD_TLS_REQUIRE),
              fixture_setup, test_required, fixture_teardown);
  g_test_add ("/nbd-tls/session/allowed", Fixture, GINT_TO_POINTER (VB_NBD_TLS_ALLOW),
              fixture_setup, test_allowed, fixture_teardown);
  g_test_add ("/nbd-tls/session/not-offered", Fixture, GINT_TO_POINTER (VB_NBD_TLS_OFF),
              fixture_setup, test_not_offered, fixture_teardown);
  return g_test_run ();
}
