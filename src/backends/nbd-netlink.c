/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See nbd-netlink.h. Raw generic netlink: one request message built in a
 * GByteArray (nlmsghdr, genlmsghdr, attributes), the reply read back with
 * its attributes walked; no libnl. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "nbd-netlink.h"

#include "vb-error.h"

#include <errno.h>
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REPLY_BUFFER 8192

/* ---- building a message ---- */

static void
put_attr (GByteArray *msg, guint16 type, const void *data, gsize len)
{
  struct nlattr nla = { .nla_len = (guint16) (NLA_HDRLEN + len), .nla_type = type };
  static const guint8 pad[NLA_ALIGNTO] = { 0 };

  g_byte_array_append (msg, (const guint8 *) &nla, sizeof nla);
  if (len)
    g_byte_array_append (msg, data, len);
  g_byte_array_append (msg, pad, NLA_ALIGN (len) - len);
}

static void
put_u64 (GByteArray *msg, guint16 type, guint64 value)
{
  put_attr (msg, type, &value, sizeof value);
}

static void
put_u32 (GByteArray *msg, guint16 type, guint32 value)
{
  put_attr (msg, type, &value, sizeof value);
}

/* A nested attribute: its header now, its length once its contents are
 * in (nest_end). */
static guint
nest_start (GByteArray *msg, guint16 type)
{
  guint at = msg->len;

  put_attr (msg, type | NLA_F_NESTED, NULL, 0);
  return at;
}

static void
nest_end (GByteArray *msg, guint at)
{
  ((struct nlattr *) (msg->data + at))->nla_len = (guint16) (msg->len - at);
}

static GByteArray *
message_new (guint16 family, guint8 command)
{
  GByteArray *msg = g_byte_array_new ();
  struct nlmsghdr nlh = { .nlmsg_type = family, .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK };
  struct genlmsghdr genl = { .cmd = command, .version = 1 };

  g_byte_array_append (msg, (const guint8 *) &nlh, sizeof nlh);
  g_byte_array_append (msg, (const guint8 *) &genl, sizeof genl);
  return msg;
}

/* ---- talking ---- */

typedef void (*AttrFunc) (guint16 type, const guint8 *data, gsize len, gpointer user_data);

/* Sends @msg and reads until the kernel's acknowledgement; every
 * attribute of a reply on the way goes to @func. 0 or -errno. */
static int
transact (int fd, GByteArray *msg, AttrFunc func, gpointer user_data)
{
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  static guint32 seq;
  guint32 my_seq = g_atomic_int_add (&seq, 1) + 1;
  g_autofree guint8 *buf = g_malloc (REPLY_BUFFER);

  ((struct nlmsghdr *) msg->data)->nlmsg_len = msg->len;
  ((struct nlmsghdr *) msg->data)->nlmsg_seq = my_seq;
  if (sendto (fd, msg->data, msg->len, 0, (struct sockaddr *) &kernel, sizeof kernel) < 0)
    return -errno;
  for (;;)
    {
      ssize_t n = recv (fd, buf, REPLY_BUFFER, 0);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          return -errno;
        }
      for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK (h, (guint32) n);
           h = NLMSG_NEXT (h, n))
        {
          if (h->nlmsg_seq != my_seq)
            continue;
          if (h->nlmsg_type == NLMSG_ERROR)
            {
              const struct nlmsgerr *err = NLMSG_DATA (h);
              return err->error; /* 0: the acknowledgement */
            }
          if (h->nlmsg_type == NLMSG_DONE)
            return 0;
          if (func)
            {
              const guint8 *p = (const guint8 *) NLMSG_DATA (h) + GENL_HDRLEN;
              gsize left = h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
              while (left >= NLA_HDRLEN)
                {
                  const struct nlattr *a = (const struct nlattr *) p;
                  if (a->nla_len < NLA_HDRLEN || a->nla_len > left)
                    break;
                  func (a->nla_type & NLA_TYPE_MASK, p + NLA_HDRLEN, a->nla_len - NLA_HDRLEN,
                        user_data);
                  p += NLA_ALIGN (a->nla_len);
                  left -= MIN (left, (gsize) NLA_ALIGN (a->nla_len));
                }
            }
        }
    }
}

static void
family_id_of (guint16 type, const guint8 *data, gsize len, gpointer user_data)
{
  if (type == CTRL_ATTR_FAMILY_ID && len >= 2)
    memcpy (user_data, data, 2);
}

/* A netlink socket and the id of family "nbd"; -errno without it. */
static int
open_family (guint16 *family)
{
  struct sockaddr_nl local = { .nl_family = AF_NETLINK };
  int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
  g_autoptr (GByteArray) msg = NULL;
  int r;

  if (fd < 0)
    return -errno;
  if (bind (fd, (struct sockaddr *) &local, sizeof local) < 0)
    {
      r = -errno;
      close (fd);
      return r;
    }
  *family = 0;
  msg = message_new (GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
  put_attr (msg, CTRL_ATTR_FAMILY_NAME, NBD_GENL_FAMILY_NAME, sizeof NBD_GENL_FAMILY_NAME);
  r = transact (fd, msg, family_id_of, family);
  if (r == 0 && *family == 0)
    r = -ENOENT;
  if (r < 0)
    {
      close (fd);
      return r;
    }
  return fd;
}

gboolean
vb_nbd_netlink_available (char **reason)
{
  guint16 family;
  int fd = open_family (&family);

  if (fd < 0)
    {
      *reason = g_strdup_printf ("no kernel nbd client (generic netlink family \"nbd\": %s; "
                                 "kernel module nbd not loaded)",
                                 g_strerror (-fd));
      return FALSE;
    }
  close (fd);
  return TRUE;
}

static gboolean
fail (GError **error, const char *what, int r)
{
  g_set_error (error, VB_ERROR, r == -EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED,
               _ ("kernel nbd client: %s: %s"), what, g_strerror (-r));
  return FALSE;
}

static void
put_sockets (GByteArray *msg, const int *fds, guint n_fds)
{
  guint sockets = nest_start (msg, NBD_ATTR_SOCKETS);

  for (guint i = 0; i < n_fds; i++)
    {
      guint item = nest_start (msg, NBD_SOCK_ITEM);
      put_u32 (msg, NBD_SOCK_FD, (guint32) fds[i]);
      nest_end (msg, item);
    }
  nest_end (msg, sockets);
}

static void
index_of (guint16 type, const guint8 *data, gsize len, gpointer user_data)
{
  if (type == NBD_ATTR_INDEX && len >= 4)
    memcpy (user_data, data, 4);
}

gint
vb_nbd_netlink_connect (const VbNbdConnect *c, GError **error)
{
  guint16 family;
  int fd = open_family (&family);
  g_autoptr (GByteArray) msg = NULL;
  guint32 index = G_MAXUINT32;
  int r;

  if (fd < 0)
    {
      fail (error, "no netlink family \"nbd\" (module nbd)", fd);
      return -1;
    }
  msg = message_new (family, NBD_CMD_CONNECT);
  if (c->index >= 0)
    put_u32 (msg, NBD_ATTR_INDEX, (guint32) c->index);
  put_u64 (msg, NBD_ATTR_SIZE_BYTES, c->size);
  put_u64 (msg, NBD_ATTR_BLOCK_SIZE_BYTES, c->block_size);
  put_u64 (msg, NBD_ATTR_SERVER_FLAGS, c->server_flags);
  if (c->timeout_s)
    put_u64 (msg, NBD_ATTR_TIMEOUT, c->timeout_s);
  if (c->dead_conn_timeout_s)
    put_u64 (msg, NBD_ATTR_DEAD_CONN_TIMEOUT, c->dead_conn_timeout_s);
  if (c->backend_id)
    put_attr (msg, NBD_ATTR_BACKEND_IDENTIFIER, c->backend_id, strlen (c->backend_id) + 1);
  put_sockets (msg, c->fds, c->n_fds);
  r = transact (fd, msg, index_of, &index);
  close (fd);
  if (r < 0)
    {
      fail (error, "connect", r);
      return -1;
    }
  if (index == G_MAXUINT32)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("kernel nbd client: connect: the kernel named no device"));
      return -1;
    }
  return (gint) index;
}

/* A command on device @index, with sockets or without. */
static gboolean
device_command (guint8 command, const char *what, gint index, const char *backend_id, guint64 size,
                const int *fds, guint n_fds, GError **error)
{
  guint16 family;
  int fd = open_family (&family);
  g_autoptr (GByteArray) msg = NULL;
  int r;

  if (fd < 0)
    return fail (error, "no netlink family \"nbd\" (module nbd)", fd);
  msg = message_new (family, command);
  put_u32 (msg, NBD_ATTR_INDEX, (guint32) index);
  if (backend_id)
    put_attr (msg, NBD_ATTR_BACKEND_IDENTIFIER, backend_id, strlen (backend_id) + 1);
  if (size)
    put_u64 (msg, NBD_ATTR_SIZE_BYTES, size);
  if (fds)
    put_sockets (msg, fds, n_fds);
  r = transact (fd, msg, NULL, NULL);
  close (fd);
  return r < 0 ? fail (error, what, r) : TRUE;
}

gboolean
vb_nbd_netlink_reconfigure (gint index, const char *backend_id, const int *fds, guint n_fds,
                            GError **error)
{
  return device_command (NBD_CMD_RECONFIGURE, "reconfigure", index, backend_id, 0, fds, n_fds,
                         error);
}

gboolean
vb_nbd_netlink_resize (gint index, const char *backend_id, guint64 size, GError **error)
{
  return device_command (NBD_CMD_RECONFIGURE, "resize", index, backend_id, size, NULL, 0, error);
}

gboolean
vb_nbd_netlink_disconnect (gint index, GError **error)
{
  return device_command (NBD_CMD_DISCONNECT, "disconnect", index, NULL, 0, NULL, 0, error);
}
