/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See engine-component.h. */
#include "config.h"

#include "engine-component.h"

#include "vb-error.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The fd an engine being replaced held: its claim goes on in a duplicate. */
static gboolean
take_component_fd (Component *c, int held, guint32 *align, GError **error)
{
  struct statx stx = { 0 };
  struct stat st;
  int fd = fcntl (held, F_DUPFD_CLOEXEC, 3);

  if (fd < 0 || fstat (fd, &st) < 0)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      vb_component_open_error (error, c->path, e);
      return FALSE;
    }
  c->is_block = S_ISBLK (st.st_mode);
  c->direct = (fcntl (fd, F_GETFL) & O_DIRECT) != 0;
  if (c->direct && statx (fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0
      && (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 0)
    *align = MAX (*align, stx.stx_dio_offset_align);
  else if (c->is_block)
    {
      int ss = 512;
      if (ioctl (fd, BLKSSZGET, &ss) == 0)
        *align = MAX (*align, (guint32) ss);
    }
  c->fd = fd;
  return TRUE;
}

static gboolean
open_component (Component *c, gboolean read_only, guint32 *align, GError **error)
{
  VbOpenFlags flags = read_only ? 0 : VB_OPEN_WRITE;
  struct statx stx = { 0 };
  struct stat st;
  gboolean direct = FALSE;
  guint32 dio_align = 0;
  int fd;

  /* a regular file or a block device only, its type known before it is
   * opened for I/O */
  fd = vb_open_component (c->path, flags, NULL);
  if (fd < 0 || fstat (fd, &st) < 0)
    goto fail;
  c->is_block = S_ISBLK (st.st_mode);
  /* O_DIRECT where the component allows it: no double caching, and a
   * serving thread never waits on page-cache writeback */
  if (statx (fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN)
      && stx.stx_dio_offset_align > 0 && stx.stx_dio_offset_align <= BUFFER_ALIGN)
    dio_align = stx.stx_dio_offset_align;
  else if (c->is_block)
    {
      int ss = 512;
      if (ioctl (fd, BLKSSZGET, &ss) == 0)
        *align = MAX (*align, (guint32) ss);
    }
  close (fd);
  /* the one fd it keeps: a block device claimed O_EXCL, as md and dm
   * claim theirs, so that nothing else mounts or claims it meanwhile */
  fd = vb_open_component (c->path, flags | VB_OPEN_EXCLUSIVE | (dio_align ? VB_OPEN_DIRECT : 0),
                          &direct);
  if (fd < 0)
    goto fail;
  if (direct)
    {
      c->direct = TRUE;
      *align = MAX (*align, dio_align);
    }
  c->fd = fd;
  return TRUE;
  fail : {
    int e = errno;
    if (fd >= 0)
      close (fd);
    vb_component_open_error (error, c->path, e);
    return FALSE;
  }
}

gboolean
engine_component_open (Component *c, const VbEngineSource *source, const VbComponentInfo *info,
                       gboolean read_only, guint32 *align, GError **error)
{
  c->path = g_strdup (source->path ? source->path : info->source);
  c->size = info->size;
  if (source->ops)
    {
      c->ops = source->ops;
      c->handle = source->handle;
      *align = MAX (*align, c->ops->block_size (c->handle));
      return TRUE;
    }
  if (info->missing)
    {
      /* gone: faulty from the start, its failure recorded at assembly */
      g_atomic_int_set (&c->faulty, 1);
      g_atomic_int_set (&c->recorded, 1);
      c->missing = TRUE;
      return TRUE;
    }
  if (source->has_fd && source->fd >= 0)
    return take_component_fd (c, source->fd, align, error);
  return open_component (c, read_only, align, error);
}

void
engine_component_close (Component *c)
{
  if (c->fd >= 0)
    close (c->fd);
  g_free (c->path);
  g_free (c->uuid);
}

int
engine_component_pread (Component *c, void *buf, guint64 length, guint64 offset)
{
  ssize_t r;

  if (c->fd < 0)
    return c->ops->pread (c->handle, buf, length, offset);
  r = pread (c->fd, buf, length, offset);
  if (r < 0)
    return -errno;
  return (guint64) r == length ? 0 : -EIO;
}

int
engine_component_pwrite (Component *c, const void *buf, guint64 length, guint64 offset)
{
  ssize_t r;

  if (c->fd < 0)
    return c->ops->pwrite (c->handle, buf, length, offset, FALSE);
  r = pwrite (c->fd, buf, length, offset);
  if (r < 0)
    return -errno;
  return (guint64) r == length ? 0 : -EIO;
}

int
engine_component_flush (Component *c)
{
  if (c->fd < 0)
    return c->ops->flush (c->handle);
  return fdatasync (c->fd) < 0 ? -errno : 0;
}

static int
write_zeros (int fd, guint64 length, guint64 offset)
{
  void *zero = NULL;
  int r = 0;

  if (posix_memalign (&zero, BUFFER_ALIGN, ZERO_CHUNK) != 0)
    return -ENOMEM;
  memset (zero, 0, ZERO_CHUNK);
  for (guint64 done = 0; done < length && r == 0;)
    {
      gsize chunk = MIN (length - done, (guint64) ZERO_CHUNK);
      ssize_t w = pwrite (fd, zero, chunk, offset + done);
      if (w < 0)
        r = -errno;
      else if ((gsize) w != chunk)
        r = -EIO;
      done += chunk;
    }
  free (zero);
  return r;
}

/* Discard is advisory: where a component cannot, nothing happens. Write
 * zeroes must zero: emulated by writing zeros where it cannot. */
int
engine_component_trim (Component *c, guint64 length, guint64 offset, gboolean zero)
{
  guint64 range[2] = { offset, length };

  if (c->fd < 0)
    return zero ? c->ops->write_zeroes (c->handle, length, offset, FALSE)
                : c->ops->discard (c->handle, length, offset);
  if (c->is_block)
    {
      if (ioctl (c->fd, zero ? BLKZEROOUT : BLKDISCARD, range) == 0)
        return 0;
    }
  else if (fallocate (c->fd,
                      zero ? FALLOC_FL_ZERO_RANGE : (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE),
                      offset, length)
           == 0)
    return 0;
  if (errno != EOPNOTSUPP && errno != ENOTTY && errno != EINVAL)
    return -errno;
  return zero ? write_zeros (c->fd, length, offset) : 0;
}

gboolean
engine_component_let_go (Component *c)
{
  int null = open ("/dev/null", O_RDWR | O_CLOEXEC);

  if (null < 0)
    return FALSE;
  dup3 (null, c->fd, O_CLOEXEC);
  close (null);
  return TRUE;
}

void
engine_component_failed (VbEngine *e, guint i, int err)
{
  Component *c = &e->components[i];

  __atomic_add_fetch (&c->errors, 1, __ATOMIC_RELAXED);
  /* a component of a device without redundancy is never dropped: its
   * errors go to the caller, and the device stays as it is */
  if (!e->redundant)
    return;
  if (g_atomic_int_compare_and_exchange (&c->faulty, 0, 1))
    {
      g_debug ("vblk: %s: component %u (%s) failed: %s", e->name, i, c->path, g_strerror (-err));
      e->component_failed (e, i, err);
    }
}

gboolean
engine_every_leg_readable (VbEngine *e)
{
  for (guint i = 0; i < e->n; i++)
    if (!engine_leg_readable (&e->components[i]))
      return FALSE;
  return TRUE;
}

/* what the public API says of a component */

char *
vb_engine_component_path_dup (VbEngine *e, guint i)
{
  g_autoptr (GMutexLocker) locker = NULL;

  g_return_val_if_fail (i < e->n, NULL);
  /* a spare taking the slot or a re-add replaces it under this lock */
  locker = g_mutex_locker_new (&e->slot_lock);
  return g_strdup (e->components[i].path);
}

int
vb_engine_component_fd (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, -1);
  return e->components[i].released || e->components[i].ops ? -1 : e->components[i].fd;
}

const char *
vb_engine_component_path (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, NULL);
  return e->components[i].path;
}

gboolean
vb_engine_component_in_sync (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, FALSE);
  return engine_leg_readable (&e->components[i]);
}

gboolean
vb_engine_component_rebuilding (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, FALSE);
  return g_atomic_int_get (&e->components[i].rebuilding) != 0;
}

gboolean
vb_engine_component_faulty (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, FALSE);
  return engine_is_faulty (&e->components[i]);
}

guint64
vb_engine_component_errors (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, 0);
  return __atomic_load_n (&e->components[i].errors, __ATOMIC_RELAXED);
}

/* Lets go of faulty component @i: its fd is pointed at /dev/null (the
 * number stays, so no request can reach a file opened later under it), so
 * a disk or loop device being removed is no longer held open. Waits for
 * the writes in flight (the barrier): not on an I/O thread. TRUE when it
 * let go now. */
gboolean
engine_component_release (VbEngine *e, guint i, char **uuid)
{
  Component *c = &e->components[i];
  gboolean now = FALSE;

  *uuid = NULL;
  if (!engine_is_faulty (c) || c->fd < 0 || c->released)
    return FALSE;
  engine_barrier_close (&e->barrier);
  if (engine_is_faulty (c) && !c->released && engine_component_let_go (c))
    {
      c->released = TRUE;
      c->direct = FALSE;
      *uuid = g_strdup (c->uuid);
      now = TRUE;
    }
  engine_barrier_open (&e->barrier);
  return now;
}

/* See engine-component.h. */
gboolean
engine_component_hole (Component *c, guint64 at, guint64 len, guint64 *run)
{
  off_t pos = (off_t) (c->data_offset + at);
  off_t d, h;
  struct stat st;

  *run = len;
  if (c->fd < 0 && c->ops && c->ops->extents)
    {
      /* a device of this vblkd's, served in place: its own answer */
      guint32 flags = 0;
      if (c->ops->extents (c->handle, c->data_offset + at, len, run, &flags) < 0)
        {
          *run = len;
          return FALSE;
        }
      return (flags & (VB_EXTENT_HOLE | VB_EXTENT_ZERO)) == (VB_EXTENT_HOLE | VB_EXTENT_ZERO);
    }
  /* only a file written with O_DIRECT: what it holds is never in dirty
   * pages, which some file systems' SEEK_DATA has missed (OpenZFS 2.2.0) */
  if (c->fd < 0 || c->is_block || !c->direct)
    return FALSE;
  d = lseek (c->fd, pos, SEEK_DATA);
  if (d < 0)
    /* ENXIO: no data from here to the end of the file; beyond its end a
     * read would not give zeroes, so only a file that is long enough */
    return errno == ENXIO && fstat (c->fd, &st) == 0 && (guint64) st.st_size >= pos + len;
  if (d > pos)
    {
      *run = MIN ((guint64) (d - pos), len);
      return TRUE;
    }
  h = lseek (c->fd, pos, SEEK_HOLE);
  if (h > pos)
    *run = MIN ((guint64) (h - pos), len);
  return FALSE;
}
