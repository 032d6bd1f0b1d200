/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel's FUSE requests, answered: a root directory holding one
 * regular file whose bytes are the device. Reads, writes, fsync and
 * fallocate go to the engine as asynchronous requests on the serving
 * thread's ring and are answered from their completion; the rest (INIT,
 * LOOKUP, GETATTR, OPEN, READDIR...) at once. The file opens with
 * FOPEN_DIRECT_IO (the page cache never holds it, so writeback never waits
 * on the threads that serve it) and FOPEN_PARALLEL_DIRECT_WRITES (writes
 * are not serialised on the inode). */
#include "config.h"

#include "fuse-proto.h"

#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ATTR_VALID_S 1
#define MAX_BACKGROUND 128 /* asynchronous requests (loop's direct I/O) in flight */

void
vb_fuse_reply (FuseThread *t, guint64 unique, int error, const void *payload, gsize len)
{
  struct fuse_out_header out
      = { .len = sizeof out + (error ? 0 : len), .error = error, .unique = unique };
  struct iovec iov[2] = { { &out, sizeof out }, { (void *) payload, error ? 0 : len } };

  /* ENOENT: the request was interrupted meanwhile; ENODEV: the connection
   * has ended. Neither needs an answer any more. */
  if (writev (t->fd, iov, payload && len && !error ? 2 : 1) < 0 && errno != ENOENT
      && errno != ENODEV)
    vb_report (t->server->path, VB_REPORT_WARNING,
               "FUSE answer to request %" G_GUINT64_FORMAT ": %s", unique, g_strerror (errno));
}

static guint64
device_size (VbFuseServer *s)
{
  return vb_engine_switch_size (s->sw);
}

static void
fill_attr (VbFuseServer *s, guint64 node, struct fuse_attr *a)
{
  memset (a, 0, sizeof *a);
  a->uid = getuid ();
  a->gid = getgid ();
  a->ino = node;
  if (node == FUSE_ROOT_ID)
    {
      a->mode = S_IFDIR | 0700;
      a->nlink = 2;
      return;
    }
  a->mode = S_IFREG | (vb_engine_switch_read_only (s->sw) ? 0400 : 0600);
  a->nlink = 1;
  a->size = device_size (s);
  a->blocks = a->size / 512;
  a->blksize = vb_engine_switch_block_size (s->sw);
}

static void
do_init (FuseThread *t, guint64 unique, const struct fuse_init_in *in)
{
  struct fuse_init_out out = { 0 };
  guint32 minor;
  guint32 want
      = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO | FUSE_MAX_PAGES | FUSE_PARALLEL_DIROPS;

  if (in->major != FUSE_KERNEL_VERSION)
    {
      /* a kernel of another major asks again with ours */
      out.major = FUSE_KERNEL_VERSION;
      out.minor = FUSE_KERNEL_MINOR_VERSION;
      vb_fuse_reply (t, unique, in->major < FUSE_KERNEL_VERSION ? -EPROTO : 0, &out, 8);
      return;
    }
  minor = MIN (in->minor, (guint32) FUSE_KERNEL_MINOR_VERSION);
  out.major = FUSE_KERNEL_VERSION;
  out.minor = minor;
  out.max_readahead = in->max_readahead;
  out.flags = in->flags & want;
  out.max_background = MAX_BACKGROUND;
  out.congestion_threshold = MAX_BACKGROUND * 3 / 4;
  out.max_write = FUSE_MAX_WRITE;
  out.time_gran = 1;
  out.max_pages = FUSE_MAX_WRITE / 4096;
  vb_fuse_reply (t, unique, 0, &out, minor < 23 ? 24 : sizeof out);
}

static void
do_lookup (FuseThread *t, guint64 unique, guint64 parent, const char *name, gsize len)
{
  VbFuseServer *s = t->server;
  struct fuse_entry_out out = { 0 };

  /* (the name comes with its terminating NUL) */
  if (parent != FUSE_ROOT_ID || strnlen (name, len) >= len || strcmp (name, s->file_name) != 0)
    {
      vb_fuse_reply (t, unique, -ENOENT, NULL, 0);
      return;
    }
  out.nodeid = FUSE_FILE_ID;
  out.generation = 1;
  out.entry_valid = ATTR_VALID_S;
  out.attr_valid = ATTR_VALID_S;
  fill_attr (s, FUSE_FILE_ID, &out.attr);
  vb_fuse_reply (t, unique, 0, &out, sizeof out);
}

static void
reply_attr (FuseThread *t, guint64 unique, guint64 node)
{
  struct fuse_attr_out out = { .attr_valid = ATTR_VALID_S };

  if (node != FUSE_ROOT_ID && node != FUSE_FILE_ID)
    {
      vb_fuse_reply (t, unique, -ENOENT, NULL, 0);
      return;
    }
  fill_attr (t->server, node, &out.attr);
  vb_fuse_reply (t, unique, 0, &out, sizeof out);
}

/* O_TRUNC of the same size and time stamps are harmless; the size itself
 * is the device's. */
static void
do_setattr (FuseThread *t, guint64 unique, guint64 node, const struct fuse_setattr_in *in)
{
  if ((in->valid & FATTR_SIZE) && (node != FUSE_FILE_ID || in->size != device_size (t->server)))
    {
      vb_fuse_reply (t, unique, -EPERM, NULL, 0);
      return;
    }
  reply_attr (t, unique, node);
}

static void
do_open (FuseThread *t, guint64 unique, guint64 node, guint32 opcode, const struct fuse_open_in *in)
{
  struct fuse_open_out out = { 0 };
  gboolean dir = opcode == FUSE_OPENDIR;

  if (node != (dir ? FUSE_ROOT_ID : FUSE_FILE_ID))
    {
      vb_fuse_reply (t, unique, dir ? -ENOTDIR : -EISDIR, NULL, 0);
      return;
    }
  if (!dir && (in->flags & O_ACCMODE) != O_RDONLY && vb_engine_switch_read_only (t->server->sw))
    {
      vb_fuse_reply (t, unique, -EROFS, NULL, 0);
      return;
    }
  if (!dir)
    out.open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;
  vb_fuse_reply (t, unique, 0, &out, sizeof out);
}

/* ".", ".." and the file, from entry @offset on, in at most @size bytes. */
static void
do_readdir (FuseThread *t, guint64 unique, const struct fuse_read_in *in)
{
  const char *names[] = { ".", "..", t->server->file_name };
  const guint64 inos[] = { FUSE_ROOT_ID, FUSE_ROOT_ID, FUSE_FILE_ID };
  guint8 buf[1024];
  gsize used = 0;

  for (guint64 i = in->offset; i < G_N_ELEMENTS (names); i++)
    {
      gsize namelen = strlen (names[i]);
      gsize rec = FUSE_REC_ALIGN (FUSE_NAME_OFFSET + namelen);
      struct fuse_dirent *d = (struct fuse_dirent *) (buf + used);
      if (used + rec > MIN (in->size, sizeof buf))
        break;
      memset (d, 0, rec);
      d->ino = inos[i];
      d->off = i + 1;
      d->namelen = namelen;
      d->type = i < 2 ? DT_DIR : DT_REG;
      memcpy (d->name, names[i], namelen);
      used += rec;
    }
  vb_fuse_reply (t, unique, 0, buf, used);
}

static void
do_statfs (FuseThread *t, guint64 unique)
{
  struct fuse_statfs_out out = { 0 };

  out.st.bsize = 4096;
  out.st.frsize = 4096;
  out.st.namelen = 255;
  vb_fuse_reply (t, unique, 0, &out, sizeof out);
}

/* --- the data path ----------------------------------------------------------- */

static void
on_data_done (VbEngineIo *io, int res)
{
  FuseSlot *slot = (FuseSlot *) io;
  FuseThread *t = slot->thread;

  if (res < 0)
    vb_fuse_reply (t, slot->unique, res, NULL, 0);
  else if (slot->opcode == FUSE_READ)
    vb_fuse_reply (t, slot->unique, 0, slot->data, io->length);
  else if (slot->opcode == FUSE_WRITE)
    {
      struct fuse_write_out out = { .size = (guint32) io->length };
      vb_fuse_reply (t, slot->unique, 0, &out, sizeof out);
    }
  else
    vb_fuse_reply (t, slot->unique, 0, NULL, 0);
  vb_fuse_slot_release (slot);
}

static void
submit (FuseSlot *slot, VbEngineIoKind kind, void *buf, guint64 offset, guint64 length,
        gboolean fua)
{
  VbEngineIo *io = &slot->io;

  if (kind == VB_ENGINE_IO_READ || kind == VB_ENGINE_IO_WRITE)
    vb_fuse_thread_register_buffers (slot->thread);
  io->kind = kind;
  io->buf = buf;
  io->offset = offset;
  io->length = length;
  io->fua = fua;
  io->done = on_data_done;
  vb_engine_switch_submit (slot->thread->server->sw, slot->thread->ring, io);
}

static void
do_read (FuseSlot *slot, const struct fuse_read_in *in)
{
  guint64 end = device_size (slot->thread->server);
  guint64 length = in->offset >= end ? 0 : MIN ((guint64) in->size, end - in->offset);

  if (in->size > FUSE_DATA_BYTES || length == 0)
    {
      /* at or past the end: no bytes (end of file), as a file answers */
      vb_fuse_reply (slot->thread, slot->unique, length == 0 ? 0 : -EINVAL, NULL, 0);
      vb_fuse_slot_release (slot);
      return;
    }
  submit (slot, VB_ENGINE_IO_READ, slot->data, in->offset, length, FALSE);
}

/* A write's data was read straight into the slot's aligned buffer. */
static void
do_write (FuseSlot *slot, const struct fuse_write_in *in, gsize data_bytes)
{
  if (in->size != data_bytes)
    {
      vb_fuse_reply (slot->thread, slot->unique, -EINVAL, NULL, 0);
      vb_fuse_slot_release (slot);
      return;
    }
  submit (slot, VB_ENGINE_IO_WRITE, slot->data, in->offset, in->size,
          (in->flags & (O_DSYNC | O_SYNC)) != 0);
}

static void
do_fallocate (FuseSlot *slot, const struct fuse_fallocate_in *in)
{
  if (in->mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
    submit (slot, VB_ENGINE_IO_DISCARD, NULL, in->offset, in->length, FALSE);
  else if ((in->mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE)
    submit (slot, VB_ENGINE_IO_WRITE_ZEROES, NULL, in->offset, in->length, FALSE);
  else
    {
      vb_fuse_reply (slot->thread, slot->unique, -EOPNOTSUPP, NULL, 0);
      vb_fuse_slot_release (slot);
    }
}

/* --- dispatch ------------------------------------------------------------------ */

/* The data ops; FALSE for any other. */
static gboolean
handle_data (FuseSlot *slot, const struct fuse_in_header *h, const guint8 *arg, gsize n)
{
  gsize argn = n - sizeof *h;

  switch (h->opcode)
    {
    case FUSE_READ:
      if (argn < sizeof (struct fuse_read_in) || h->nodeid != FUSE_FILE_ID)
        return FALSE;
      do_read (slot, (const struct fuse_read_in *) arg);
      return TRUE;
    case FUSE_WRITE:
      if (n < FUSE_HEAD_BYTES || h->nodeid != FUSE_FILE_ID)
        return FALSE;
      do_write (slot, (const struct fuse_write_in *) arg, n - FUSE_HEAD_BYTES);
      return TRUE;
    case FUSE_FSYNC:
      if (h->nodeid != FUSE_FILE_ID)
        return FALSE;
      submit (slot, VB_ENGINE_IO_FLUSH, NULL, 0, 0, FALSE);
      return TRUE;
    case FUSE_FALLOCATE:
      if (argn < sizeof (struct fuse_fallocate_in) || h->nodeid != FUSE_FILE_ID)
        return FALSE;
      do_fallocate (slot, (const struct fuse_fallocate_in *) arg);
      return TRUE;
    default:
      return FALSE;
    }
}

/* Everything but data: answered at once (or not at all: FORGET, INTERRUPT). */
static void
handle_other (FuseThread *t, const struct fuse_in_header *h, const guint8 *arg, gsize argn)
{
  guint64 u = h->unique;

#define ARG_IS(type) (argn >= sizeof (type))
  switch (h->opcode)
    {
    case FUSE_INIT:
      if (ARG_IS (guint32[4]))
        {
          struct fuse_init_in in = { 0 };
          memcpy (&in, arg, MIN (argn, sizeof in));
          do_init (t, u, &in);
          return;
        }
      break;
    case FUSE_LOOKUP:
      do_lookup (t, u, h->nodeid, (const char *) arg, argn);
      return;
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
    case FUSE_INTERRUPT:
      return;
    case FUSE_GETATTR:
      reply_attr (t, u, h->nodeid);
      return;
    case FUSE_SETATTR:
      if (ARG_IS (struct fuse_setattr_in))
        {
          do_setattr (t, u, h->nodeid, (const struct fuse_setattr_in *) arg);
          return;
        }
      break;
    case FUSE_OPEN:
    case FUSE_OPENDIR:
      if (ARG_IS (struct fuse_open_in))
        {
          do_open (t, u, h->nodeid, h->opcode, (const struct fuse_open_in *) arg);
          return;
        }
      break;
    case FUSE_READDIR:
      if (ARG_IS (struct fuse_read_in) && h->nodeid == FUSE_ROOT_ID)
        {
          do_readdir (t, u, (const struct fuse_read_in *) arg);
          return;
        }
      break;
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_FLUSH:
    case FUSE_ACCESS:
    case FUSE_DESTROY:
      vb_fuse_reply (t, u, 0, NULL, 0);
      return;
    case FUSE_STATFS:
      do_statfs (t, u);
      return;
    default:
      vb_fuse_reply (t, u, -ENOSYS, NULL, 0);
      return;
    }
#undef ARG_IS
  vb_fuse_reply (t, u, -EINVAL, NULL, 0);
}

void
vb_fuse_handle (FuseSlot *slot, gsize n)
{
  FuseThread *t = slot->thread;
  const struct fuse_in_header *h = (const struct fuse_in_header *) slot->head;
  guint8 whole[4096];
  const guint8 *arg;

  if (n < sizeof *h || h->len != n)
    {
      vb_report (t->server->path, VB_REPORT_WARNING, "FUSE request of %zu bytes: malformed", n);
      /* (with a whole header, its sender is told rather than left waiting) */
      if (n >= sizeof *h)
        vb_fuse_reply (t, h->unique, -EIO, NULL, 0);
      vb_fuse_slot_release (slot);
      return;
    }
  slot->unique = h->unique;
  slot->opcode = h->opcode;
  /* a request's arguments start in the head and go on in the data buffer
   * (where a write's data lands, aligned) */
  arg = slot->head + sizeof *h;
  if (h->opcode == FUSE_WRITE || n <= FUSE_HEAD_BYTES)
    {
      if (handle_data (slot, h, arg, n))
        return;
    }
  else if (n <= sizeof whole)
    {
      memcpy (whole, slot->head, FUSE_HEAD_BYTES);
      memcpy (whole + FUSE_HEAD_BYTES, slot->data, n - FUSE_HEAD_BYTES);
      arg = whole + sizeof *h;
    }
  else
    {
      vb_fuse_reply (t, h->unique, -EINVAL, NULL, 0);
      vb_fuse_slot_release (slot);
      return;
    }
  handle_other (t, h, arg, n - sizeof *h);
  vb_fuse_slot_release (slot);
}

int
vb_fuse_notify_size (VbFuseServer *s)
{
  /* the attributes only (off < 0): the next getattr reads the new size */
  struct fuse_notify_inval_inode_out out = { .ino = FUSE_FILE_ID, .off = -1, .len = 0 };
  struct fuse_out_header h = { .len = sizeof h + sizeof out, .error = FUSE_NOTIFY_INVAL_INODE };
  struct iovec iov[2] = { { &h, sizeof h }, { &out, sizeof out } };

  if (writev (s->fd, iov, 2) < 0)
    return errno == ENOENT ? 0 : -errno;
  return 0;
}
