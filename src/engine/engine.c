/* The engine core: splits each request along the driver's placement,
 * issues the pieces to the components with io_uring from the calling
 * thread's own ring, and applies one redundancy rule for every driver:
 * read one healthy copy (retry another on error, marking the failed one
 * faulty), write every healthy copy, succeed while one copy of each piece
 * landed. Nothing on this path allocates per request beyond a per-thread
 * buffer that only grows. */
#include "config.h"

#include "engine.h"

#include "vb-error.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine-private.h"

/* Per thread: a ring, an aligned bounce buffer and the piece table. */
typedef struct {
  struct io_uring ring;
  gboolean ring_ok;
  void *bounce;
  gsize bounce_size;
  VbMapping pieces[MAX_PIECES];
} ThreadState;

/* A device stacked on a device of this process calls it in place, on the
 * same thread: each nesting level gets its own state. */
#define MAX_DEPTH 8

typedef struct {
  ThreadState *levels[MAX_DEPTH];
  guint depth;
} ThreadStates;

static void
thread_states_free (gpointer data)
{
  ThreadStates *all = data;

  for (guint i = 0; i < MAX_DEPTH; i++)
    if (all->levels[i])
      {
        if (all->levels[i]->ring_ok)
          io_uring_queue_exit (&all->levels[i]->ring);
        free (all->levels[i]->bounce);
        g_free (all->levels[i]);
      }
  g_free (all);
}

static GPrivate thread_states_key = G_PRIVATE_INIT (thread_states_free);

/* The state of this thread at the current nesting level; NULL when nested
 * too deep. Every acquire is paired with a release. */
static ThreadState *
thread_state_acquire (void)
{
  ThreadStates *all = g_private_get (&thread_states_key);
  ThreadState *ts;

  if (all == NULL)
    {
      all = g_new0 (ThreadStates, 1);
      g_private_set (&thread_states_key, all);
    }
  if (all->depth >= MAX_DEPTH)
    return NULL;
  ts = all->levels[all->depth];
  if (ts == NULL)
    {
      ts = g_new0 (ThreadState, 1);
      ts->ring_ok = io_uring_queue_init (RING_ENTRIES, &ts->ring, 0) == 0;
      all->levels[all->depth] = ts;
    }
  all->depth++;
  return ts;
}

static void
thread_state_release (void)
{
  ThreadStates *all = g_private_get (&thread_states_key);

  all->depth--;
}

static void *
bounce_buffer (ThreadState *ts, gsize size)
{
  if (ts->bounce_size < size)
    {
      free (ts->bounce);
      ts->bounce = NULL;
      ts->bounce_size = 0;
      if (posix_memalign (&ts->bounce, BUFFER_ALIGN, size) != 0)
        return NULL;
      ts->bounce_size = size;
    }
  return ts->bounce;
}

/* components */

gboolean
engine_is_faulty (Component *c)
{
  return g_atomic_int_get (&c->faulty) != 0;
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
      /* the survivors' superblocks say so before the I/O that found it
       * completes (and before any write that skips it does) */
      if (e->meta)
        engine_meta_record_failure (e, i);
      if (e->redundant && !vb_engine_can_lose (e, G_MAXUINT))
        {
          g_atomic_int_set (&e->lost, 1);
          g_warning ("%s: no complete copy of the data is left; the device refuses writes",
                     e->name);
        }
      if (e->failure_func)
        e->failure_func (e, i, err, e->failure_data);
      if (e->meta && engine_meta_has_spare (e))
        engine_sync_take_spare (e, i);
    }
}

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
fail:
  {
    int e = errno;
    if (fd >= 0)
      close (fd);
    vb_component_open_error (error, c->path, e);
    return FALSE;
  }
}

VbEngine *
vb_engine_new (const char *name, const VbDriver *driver, GHashTable *attributes, guint n_components,
               const VbEngineSource *sources, const VbComponentInfo *infos,
               const VbEngineIdentity *identity, gboolean read_only, GError **error)
{
  g_autoptr (VbEngine) e = g_new0 (VbEngine, 1);
  guint32 align = 512;

  g_return_val_if_fail (driver->layout != NULL && driver->map != NULL, NULL);

  e->name = g_strdup (name);
  e->driver = driver;
  e->read_only = read_only;
  e->n = n_components;
  e->components = g_new0 (Component, n_components);
  g_rw_lock_init (&e->barrier);
  g_mutex_init (&e->sync_lock);
  g_mutex_init (&e->slot_lock);
  for (guint i = 0; i < n_components; i++)
    e->components[i].fd = -1;
  driver->layout (attributes, infos, n_components, &e->layout);

  for (guint i = 0; i < n_components; i++)
    {
      Component *c = &e->components[i];
      c->path = g_strdup (sources[i].path ? sources[i].path : infos[i].source);
      c->size = infos[i].size;
      if (identity && identity->errors)
        c->errors = identity->errors[i];
      if (sources[i].ops)
        {
          c->ops = sources[i].ops;
          c->handle = sources[i].handle;
          align = MAX (align, c->ops->block_size (c->handle));
        }
      else if (infos[i].missing)
        {
          /* gone: faulty from the start, its failure recorded at assembly */
          g_atomic_int_set (&c->faulty, 1);
          g_atomic_int_set (&c->recorded, 1);
          c->missing = TRUE;
        }
      else if (sources[i].has_fd && sources[i].fd >= 0)
        {
          if (!take_component_fd (c, sources[i].fd, &align, error))
            return NULL;
        }
      else if (!open_component (c, read_only, &align, error))
        return NULL;
    }
  e->block_size = align;
  if (e->layout.size % align != 0)
    e->layout.size -= e->layout.size % align;

  e->redundant = e->layout.copies > 1;
  if (g_hash_table_contains (attributes, "sync_speed_min"))
    engine_meta_set_speeds (e, vb_attr_get_u64 (attributes, "sync_speed_min"),
                            vb_attr_get_u64 (attributes, "sync_speed_max"));
  if (strcmp (driver->name, "faulty") == 0)
    {
      VbFaultSpec spec;
      e->fault = vb_fault_new ();
      vb_fault_spec_from_attributes (attributes, &spec);
      vb_fault_set (e->fault, &spec);
    }
  if (e->redundant && !vb_engine_can_lose (e, G_MAXUINT))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "device '%s': too many components are missing: some data has no copy left",
                   name);
      return NULL;
    }
  if (identity && identity->out_of_sync && e->redundant && vb_driver_data_offset (attributes) == 0)
    {
      /* metadata=none: the desired state says which copies are behind */
      guint readable = 0;
      for (guint i = 0; i < n_components; i++)
        if (identity->failed && identity->failed[i] && !e->components[i].missing)
          {
            /* it failed: it stays out until a re-add puts it back */
            g_atomic_int_set (&e->components[i].faulty, 1);
            g_atomic_int_set (&e->components[i].recorded, 1);
          }
        else if (identity->out_of_sync[i] && !e->components[i].missing)
          {
            g_atomic_int_set (&e->components[i].rebuilding, 1);
            e->components[i].full_rebuild = TRUE;
            e->need_rebuild = TRUE;
          }
        else
          readable += !engine_is_faulty (&e->components[i]);
      if (readable == 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       "device '%s': no component is in sync (the desired state names none "
                       "that is here); refusing to start",
                       name);
          return NULL;
        }
    }
  if (vb_driver_data_offset (attributes) > 0)
    {
      for (guint i = 0; i < n_components; i++)
        e->components[i].data_offset = vb_driver_data_offset (attributes);
      if (!engine_meta_assemble (e, identity, attributes, error))
        return NULL;
    }
  return g_steal_pointer (&e);
}

void
vb_engine_free (VbEngine *e)
{
  if (e == NULL)
    return;
  engine_sync_join_spare (e);
  engine_sync_stop (e);
  if (e->meta)
    {
      engine_meta_close (e);
      engine_meta_free (e);
    }
  for (guint i = 0; i < e->n; i++)
    {
      if (e->components[i].fd >= 0)
        close (e->components[i].fd);
      g_free (e->components[i].path);
      g_free (e->components[i].uuid);
    }
  for (guint i = 0; e->kept_fds && i < e->kept_fds->len; i++)
    close (g_array_index (e->kept_fds, int, i));
  g_clear_pointer (&e->kept_fds, g_array_unref);
  vb_fault_free (e->fault);
  g_rw_lock_clear (&e->barrier);
  g_mutex_clear (&e->sync_lock);
  g_mutex_clear (&e->slot_lock);
  g_free (e->components);
  g_free (e->name);
  g_free (e);
}

void
vb_engine_free_unclean (VbEngine *e)
{
  if (e && e->meta)
    engine_meta_forget (e);
  vb_engine_free (e);
}

void
vb_engine_quiesce (VbEngine *e)
{
  g_atomic_int_set (&e->quiesced, 1);
  engine_sync_join_spare (e);
  engine_sync_stop (e);
  engine_meta_stop_sweeper (e);
}

void
vb_engine_resume (VbEngine *e)
{
  g_atomic_int_set (&e->quiesced, 0);
  engine_sync_start_needed (e, engine_meta_needs_sync (e));
}

gboolean
vb_engine_component_in_sync (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, FALSE);
  return engine_leg_readable (&e->components[i]);
}

void
vb_engine_set_failure_func (VbEngine *e, VbEngineFailureFunc func, gpointer user_data)
{
  e->failure_func = func;
  e->failure_data = user_data;
}

void
vb_engine_set_job_func (VbEngine *e, VbEngineJobFunc func, gpointer user_data)
{
  e->job_func = func;
  e->job_data = user_data;
}

void
vb_engine_update (VbEngine *e, GHashTable *attributes)
{
  if (e->fault)
    {
      VbFaultSpec spec;
      vb_fault_spec_from_attributes (attributes, &spec);
      vb_fault_set (e->fault, &spec);
    }
  if (g_hash_table_contains (attributes, "sync_speed_min"))
    engine_meta_set_speeds (e, vb_attr_get_u64 (attributes, "sync_speed_min"),
                            vb_attr_get_u64 (attributes, "sync_speed_max"));
  /* the superblocks carry the attribute text */
  if (e->meta)
    engine_meta_set_attributes (e, attributes);
}

gboolean
vb_engine_component_missing (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, FALSE);
  return e->components[i].missing && engine_is_faulty (&e->components[i]);
}

gboolean
vb_engine_component_rebuilding (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, FALSE);
  return g_atomic_int_get (&e->components[i].rebuilding) != 0;
}

/* Plain synchronous I/O on one component, for metadata and jobs. Buffers
 * are aligned for O_DIRECT by the callers. */
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

const char *
vb_engine_name (VbEngine *e)
{
  return e->name;
}

const char *
vb_engine_component_path (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, NULL);
  return e->components[i].path;
}

guint
vb_engine_n_components (VbEngine *e)
{
  return e->n;
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

/* The placement repeats with a period no longer than n × copies chunks
 * (raid10 near) and is uniform otherwise; checking one period of pieces
 * tells whether any data would be left without a healthy copy. */
gboolean
vb_engine_lost_data (VbEngine *e)
{
  return e->redundant && !vb_engine_can_lose (e, G_MAXUINT);
}

gboolean
vb_engine_can_lose (VbEngine *e, guint lost)
{
  guint64 step = e->layout.chunk_size ? e->layout.chunk_size : e->layout.size;
  guint64 span = MIN (e->layout.size, step * MAX (1u, e->n) * MAX (1u, e->layout.copies));

  if (!e->redundant)
    return FALSE;
  for (guint64 off = 0; off < span;)
    {
      VbMapping m;
      guint healthy = 0;
      e->driver->map (&e->layout, off, span - off, &m);
      for (guint k = 0; k < m.n_copies; k++)
        {
          guint c = m.copies[k].component;
          if (c != lost && engine_leg_readable (&e->components[c]))
            healthy++;
        }
      if (healthy == 0)
        return FALSE;
      off += m.length;
    }
  return TRUE;
}

int
vb_engine_set_faulty (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, -EINVAL);
  if (!e->redundant)
    return -ENOTSUP;
  if (engine_is_faulty (&e->components[i]))
    return 0;
  if (!vb_engine_can_lose (e, i))
    return -EBUSY;
  /* -ECANCELED tells the listener it was asked for, not an I/O error */
  engine_component_failed (e, i, -ECANCELED);
  return 0;
}

/* the data path */

typedef struct {
  guint piece;
  guint copy; /* index into the piece's copies */
  int res;
  gboolean refused; /* a read not issued: the leg is not in sync any more */
} Sub;

static int
check_range (VbEngine *e, guint64 length, guint64 offset)
{
  if (offset % e->block_size != 0 || length % e->block_size != 0)
    return -EINVAL;
  if (offset > e->layout.size || length > e->layout.size - offset)
    return -EINVAL;
  return 0;
}

/* Fills ts->pieces for [offset, offset + length); returns how many and
 * sets *covered to the bytes they cover (the caller loops for the rest). */
static guint
map_pieces (VbEngine *e, ThreadState *ts, guint64 offset, guint64 length, guint64 *covered)
{
  guint n = 0;
  guint64 done = 0;

  while (done < length && n < MAX_PIECES)
    {
      e->driver->map (&e->layout, offset + done, length - done, &ts->pieces[n]);
      g_assert (ts->pieces[n].length > 0 && ts->pieces[n].offset == offset + done);
      done += ts->pieces[n].length;
      n++;
    }
  *covered = done;
  return n;
}

static void
reap (ThreadState *ts, Sub *subs, guint *inflight)
{
  if (*inflight == 0)
    return;
  io_uring_submit_and_wait (&ts->ring, *inflight);
  while (*inflight > 0)
    {
      struct io_uring_cqe *cqe;
      if (io_uring_wait_cqe (&ts->ring, &cqe) < 0)
        break;
      Sub *s = &subs[io_uring_cqe_get_data64 (cqe)];
      VbMapping *p = &ts->pieces[s->piece];
      /* a short transfer on a component of the right size is an error */
      s->res = cqe->res < 0 ? cqe->res : ((guint64) cqe->res == p->length ? 0 : -EIO);
      io_uring_cqe_seen (&ts->ring, cqe);
      (*inflight)--;
    }
}

/* Runs @n subs (read or write of their piece's copy) and stores each one's
 * result; in-process components are called in place. */
static void
run_subs (VbEngine *e, ThreadState *ts, Sub *subs, guint n, gboolean write, guint8 *buf,
          guint64 base, gboolean fua)
{
  guint inflight = 0;

  for (guint i = 0; i < n; i++)
    {
      Sub *s = &subs[i];
      VbMapping *p = &ts->pieces[s->piece];
      Component *c = &e->components[p->copies[s->copy].component];
      guint64 coff = c->data_offset + p->copies[s->copy].offset;
      guint8 *data = buf + (p->offset - base);
      struct io_uring_sqe *sqe;

      if (!write && G_UNLIKELY (!engine_leg_readable (c)))
        {
          /* picked in sync, not any more: failed meanwhile (another
           * request's error), and another copy is read. A leg put behind
           * without failing first is a bug (assembly puts legs behind
           * before anything is served, a re-add only faulty ones): loud,
           * and fatal in tests, but still never read */
          if (!engine_is_faulty (c))
            g_critical ("%s: a read went to component %s, which is not in sync; another copy "
                        "is read",
                        e->name, c->path);
          s->res = -EIO;
          s->refused = TRUE;
          continue;
        }
      if (c->fd < 0)
        {
          s->res = write ? c->ops->pwrite (c->handle, data, p->length, coff, fua)
                         : c->ops->pread (c->handle, data, p->length, coff);
          continue;
        }
      if ((sqe = io_uring_get_sqe (&ts->ring)) == NULL)
        {
          reap (ts, subs, &inflight);
          sqe = io_uring_get_sqe (&ts->ring);
        }
      if (write)
        io_uring_prep_write (sqe, c->fd, data, p->length, coff);
      else
        io_uring_prep_read (sqe, c->fd, data, p->length, coff);
      if (write && fua)
        sqe->rw_flags = RWF_DSYNC;
      io_uring_sqe_set_data64 (sqe, i);
      inflight++;
    }
  reap (ts, subs, &inflight);
}

/* Read balancing: the copy of @p to read, round robin from @start among
 * the legs known to be in sync only (a leg behind a rebuild or resync has
 * holes or stale chunks: never read); -1 when none is. run_subs checks it
 * again as the read is issued. */
static gint
pick_in_sync (VbEngine *e, const VbMapping *p, guint start)
{
  for (guint k = 0; k < p->n_copies; k++)
    {
      guint copy = (start + k) % p->n_copies;

      if (engine_leg_readable (&e->components[p->copies[copy].component]))
        return copy;
    }
  return -1;
}

static int
read_batch (VbEngine *e, ThreadState *ts, guint n, guint8 *buf, guint64 base)
{
  Sub subs[MAX_PIECES];
  guint tried[MAX_PIECES] = { 0 };
  guint pending = n;
  guint start = g_atomic_int_add (&e->rr, 1);

  for (guint i = 0; i < n; i++)
    {
      gint copy = pick_in_sync (e, &ts->pieces[i], start + i);
      if (copy < 0)
        return -EIO;
      subs[i] = (Sub){ i, copy, 0 };
    }
  while (pending > 0)
    {
      guint again = 0;
      run_subs (e, ts, subs, pending, FALSE, buf, base, FALSE);
      for (guint i = 0; i < pending; i++)
        {
          Sub *s = &subs[i];
          VbMapping *p = &ts->pieces[s->piece];
          gint next;
          if (s->res == 0)
            continue;
          if (!s->refused)
            engine_component_failed (e, p->copies[s->copy].component, s->res);
          if (++tried[s->piece] >= p->n_copies || (next = pick_in_sync (e, p, s->copy + 1)) < 0)
            return s->res < 0 ? s->res : -EIO;
          subs[again++] = (Sub){ s->piece, next, 0 };
        }
      pending = again;
    }
  return 0;
}

static int
write_batch (VbEngine *e, ThreadState *ts, guint n, guint8 *buf, guint64 base, gboolean fua)
{
  Sub subs[MAX_PIECES * VB_MAX_COPIES / 4];
  guint landed[MAX_PIECES] = { 0 };
  guint nsubs = 0, first_piece = 0;
  int err = 0;

  for (guint i = 0; i <= n; i++)
    {
      /* run when the sub table is full or every piece is queued */
      if (i == n || nsubs + ts->pieces[i].n_copies > G_N_ELEMENTS (subs))
        {
          run_subs (e, ts, subs, nsubs, TRUE, buf, base, fua);
          for (guint k = 0; k < nsubs; k++)
            if (subs[k].res == 0)
              {
                Component *c
                    = &e->components[ts->pieces[subs[k].piece].copies[subs[k].copy].component];
                if (!g_atomic_int_get (&c->rebuilding))
                  landed[subs[k].piece]++;
              }
            else
              {
                err = subs[k].res;
                engine_component_failed (
                    e, ts->pieces[subs[k].piece].copies[subs[k].copy].component, subs[k].res);
              }
          for (guint p = first_piece; p < i; p++)
            if (landed[p] == 0)
              return err < 0 ? err : -EIO;
          first_piece = i;
          nsubs = 0;
          if (i == n)
            break;
        }
      for (guint k = 0; k < ts->pieces[i].n_copies; k++)
        {
          guint ci = ts->pieces[i].copies[k].component;
          if (!engine_is_faulty (&e->components[ci]))
            subs[nsubs++] = (Sub){ i, k, 0 };
          else if (e->meta)
            /* skipping a copy is only safe once the metadata says it failed */
            engine_meta_wait_recorded (e, ci);
        }
    }
  return 0;
}

static gboolean
needs_bounce (VbEngine *e, const void *buf)
{
  if (((guintptr) buf & (BUFFER_ALIGN - 1)) == 0)
    return FALSE;
  for (guint i = 0; i < e->n; i++)
    if (e->components[i].direct)
      return TRUE;
  return FALSE;
}

static int
engine_rw_in (VbEngine *e, ThreadState *ts, gboolean write, guint8 *buf, guint64 length,
              guint64 offset, gboolean fua)
{
  guint8 *io = buf;
  int r;

  if ((r = check_range (e, length, offset)) < 0)
    return r;
  if (write && e->read_only)
    return -EPERM;
  if (!ts->ring_ok)
    return -ENOMEM;
  if (needs_bounce (e, buf))
    {
      io = bounce_buffer (ts, length);
      if (io == NULL)
        return -ENOMEM;
      if (write)
        memcpy (io, buf, length);
    }
  for (guint64 done = 0; done < length;)
    {
      guint64 covered;
      guint n = map_pieces (e, ts, offset + done, length - done, &covered);
      r = write ? write_batch (e, ts, n, io + done, offset + done, fua)
                : read_batch (e, ts, n, io + done, offset + done);
      if (r < 0)
        return r;
      done += covered;
    }
  if (!write && io != buf)
    memcpy (buf, io, length);
  return 0;
}

static int
engine_rw (VbEngine *e, gboolean write, guint8 *buf, guint64 length, guint64 offset, gboolean fua)
{
  ThreadState *ts = thread_state_acquire ();
  int r;

  if (ts == NULL)
    return -ELOOP;
  __atomic_add_fetch (&e->io_count, 1, __ATOMIC_RELAXED);
  if (e->fault && (r = vb_fault_check (e->fault, write, offset, length)) < 0)
    {
      thread_state_release ();
      return r;
    }
  if (write && e->meta && g_atomic_int_get (&e->lost))
    {
      /* the device failed: a write would land on no complete copy */
      thread_state_release ();
      return -EIO;
    }
  /* every write of a redundant device holds the barrier, with metadata or
   * without: a rebuild's copy of a unit must not race with it */
  if (write && (e->meta || e->redundant))
    {
      g_rw_lock_reader_lock (&e->barrier);
      if (e->meta == NULL || (r = engine_meta_write_begin (e, offset, length)) == 0)
        {
          r = engine_rw_in (e, ts, write, buf, length, offset, fua);
          if (e->meta)
            engine_meta_write_end (e, offset, length);
        }
      g_rw_lock_reader_unlock (&e->barrier);
    }
  else
    r = engine_rw_in (e, ts, write, buf, length, offset, fua);
  thread_state_release ();
  return r;
}

static int
engine_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  return engine_rw (handle, FALSE, buf, length, offset, FALSE);
}

static int
engine_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  return engine_rw (handle, TRUE, (guint8 *) buf, length, offset, fua);
}

/* Flush reaches every healthy component; a copy that cannot be made
 * durable is no copy. */
static int
engine_flush (void *handle)
{
  VbEngine *e = handle;
  ThreadState *ts = thread_state_acquire ();
  int results[e->n];
  guint queued = 0;
  int err = 0;
  gboolean any = FALSE;

  if (ts == NULL)
    return -ELOOP;
  if (!ts->ring_ok)
    {
      thread_state_release ();
      return -ENOMEM;
    }
  if (e->fault)
    {
      int f = vb_fault_check (e->fault, TRUE, 0, 0);
      if (f < 0)
        {
          thread_state_release ();
          return f;
        }
    }
  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      results[i] = 0;
      if (engine_is_faulty (c))
        continue;
      if (c->fd < 0)
        {
          results[i] = c->ops->flush (c->handle);
          continue;
        }
      struct io_uring_sqe *sqe = io_uring_get_sqe (&ts->ring);
      io_uring_prep_fsync (sqe, c->fd, IORING_FSYNC_DATASYNC);
      io_uring_sqe_set_data64 (sqe, i);
      queued++;
    }
  if (queued)
    io_uring_submit_and_wait (&ts->ring, queued);
  while (queued > 0)
    {
      struct io_uring_cqe *cqe;
      if (io_uring_wait_cqe (&ts->ring, &cqe) < 0)
        break;
      results[io_uring_cqe_get_data64 (cqe)] = cqe->res < 0 ? cqe->res : 0;
      io_uring_cqe_seen (&ts->ring, cqe);
      queued--;
    }
  thread_state_release ();
  for (guint i = 0; i < e->n; i++)
    {
      if (engine_is_faulty (&e->components[i]))
        continue;
      if (results[i] < 0)
        {
          err = results[i];
          engine_component_failed (e, i, results[i]);
        }
      else
        any = TRUE;
    }
  /* without redundancy any failed flush fails; with it, a surviving copy
   * of everything must remain (the failed ones were just dropped) */
  if (!e->redundant)
    return err;
  return any ? 0 : (err < 0 ? err : -EIO);
}

static int
write_zeros (int fd, guint64 length, guint64 offset, gboolean direct)
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
static int
component_trim (Component *c, guint64 length, guint64 offset, gboolean zero)
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
  return zero ? write_zeros (c->fd, length, offset, c->direct) : 0;
}

static int
engine_trim_in (VbEngine *e, ThreadState *ts, guint64 length, guint64 offset, gboolean zero)
{
  int r;

  if ((r = check_range (e, length, offset)) < 0)
    return r;
  if (e->read_only)
    return -EPERM;
  for (guint64 done = 0; done < length;)
    {
      guint64 covered;
      guint n = map_pieces (e, ts, offset + done, length - done, &covered);
      for (guint i = 0; i < n; i++)
        {
          VbMapping *p = &ts->pieces[i];
          guint landed = 0;
          int err = 0;
          for (guint k = 0; k < p->n_copies; k++)
            {
              Component *c = &e->components[p->copies[k].component];
              if (engine_is_faulty (c))
                continue;
              int res = component_trim (c, p->length, c->data_offset + p->copies[k].offset, zero);
              if (res == 0)
                landed++;
              else
                {
                  err = res;
                  engine_component_failed (e, p->copies[k].component, res);
                }
            }
          if (landed == 0)
            return err < 0 ? err : -EIO;
        }
      done += covered;
    }
  return 0;
}

static int
engine_trim (VbEngine *e, guint64 length, guint64 offset, gboolean zero, gboolean fua)
{
  ThreadState *ts = thread_state_acquire ();
  int r;

  if (ts == NULL)
    return -ELOOP;
  if (e->fault && (r = vb_fault_check (e->fault, TRUE, offset, length)) < 0)
    {
      thread_state_release ();
      return r;
    }
  if (e->meta || e->redundant)
    {
      g_rw_lock_reader_lock (&e->barrier);
      if (e->meta == NULL || (r = engine_meta_write_begin (e, offset, length)) == 0)
        {
          r = engine_trim_in (e, ts, length, offset, zero);
          if (e->meta)
            engine_meta_write_end (e, offset, length);
        }
      g_rw_lock_reader_unlock (&e->barrier);
    }
  else
    r = engine_trim_in (e, ts, length, offset, zero);
  thread_state_release ();
  return r == 0 && fua ? engine_flush (e) : r;
}

static int
engine_discard (void *handle, guint64 length, guint64 offset)
{
  return engine_trim (handle, length, offset, FALSE, FALSE);
}

static int
engine_write_zeroes (void *handle, guint64 length, guint64 offset, gboolean fua)
{
  return engine_trim (handle, length, offset, TRUE, fua);
}

static guint64
engine_size (void *handle)
{
  return ((VbEngine *) handle)->layout.size;
}

static guint32
engine_block_size (void *handle)
{
  return ((VbEngine *) handle)->block_size;
}

static gboolean
engine_read_only (void *handle)
{
  return ((VbEngine *) handle)->read_only;
}

static gboolean
engine_can_multi_conn (void *handle)
{
  /* a flush flushes every component, whichever connection wrote */
  return TRUE;
}

const VbBlockOps vb_engine_ops = {
  .size = engine_size,
  .block_size = engine_block_size,
  .read_only = engine_read_only,
  .can_multi_conn = engine_can_multi_conn,
  .pread = engine_pread,
  .pwrite = engine_pwrite,
  .flush = engine_flush,
  .discard = engine_discard,
  .write_zeroes = engine_write_zeroes,
};
