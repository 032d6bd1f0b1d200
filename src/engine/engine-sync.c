/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's jobs: resync (make the copies of dirty chunks equal after
 * an unclean stop), rebuild (fill a component that is new to its slot, or
 * re-add a returning one through the bitmap), check (compare every copy,
 * count mismatches) and repair (check, and rewrite mismatches from the
 * first in-sync copy). One job runs per device, on its own thread, one
 * unit at a time under the write barrier, so no write lands between a
 * unit's read and its writes. A job reports through the job function.
 * The bitmap's sweeper, which clears the bits of chunks written long
 * enough ago, runs here too: it clears only while no job runs. */
#include "config.h"

#include "engine-sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_INTERVAL_US (5 * G_USEC_PER_SEC)
#define UNIT (1u << 20)    /* bytes copied or compared under the barrier at once */
#define REPORT_US (250000) /* progress reports at most this often */
#define BUSY_WINDOW_US (100000)
#define RECORD_EVERY (64ULL << 20) /* a full rebuild's progress goes to the superblocks */
#define CLEAR_EVERY (64ULL << 20)  /* chunks made equal leave the bitmap in batches */

typedef enum {
  OP_RESYNC,
  OP_REBUILD,
  OP_CHECK,
  OP_REPAIR,
} SyncOp;

struct _EngineSync {
  VbEngine *engine;
  GThread *thread;
  SyncOp op;
  const char *operation;
  guint64 id;
  gint cancel;      /* atomic */
  gboolean ended;   /* the job has ended: no longer running */
  gboolean done;    /* the thread has ended */
  gint component;   /* the slot rebuilt onto, or -1 */
  gboolean full;    /* every byte, not only the bitmap's dirty chunks */
  guint64 resume;   /* full rebuild: below it only dirty chunks (a stopped rebuild's point) */
  gboolean unequal; /* no bitmap, and the copies may differ (an unclean stop, a resync cut short) */
  guint64 bytes, progress, mismatches;
  gint64 last_report;
  GArray *synced; /* chunks made equal whose bits are not cleared yet */
  guint64 synced_bytes;
  /* pacing */
  gint64 started;
  guint64 paced_bytes;
  gint64 pace_start;
  guint64 io_seen;
  gint64 busy_until;
  guint8 *buf[VB_MAX_COPIES];
};

static guint64 next_job_id = 1; /* atomic */

static void
report (EngineSync *s, VbEngineJobState state, const char *message)
{
  VbEngine *e = s->engine;
  VbEngineJob job = {
    .id = s->id,
    .device = e->name,
    .operation = s->operation,
    .state = state,
    .bytes = s->bytes,
    .done = s->progress,
    .mismatches = s->mismatches,
    .component = s->component,
    .component_uuid = s->component >= 0 ? e->components[s->component].uuid : NULL,
    .message = message,
  };

  s->last_report = g_get_monotonic_time ();
  if (e->job_func)
    e->job_func (e, &job, e->job_data);
}

/* The job's last report: the job counts as ended before anyone hears it
 * has (a settle right after "finished" found it still running: -EBUSY) */
static void
report_end (EngineSync *s, VbEngineJobState state, const char *message)
{
  g_atomic_int_set (&s->ended, TRUE);
  report (s, state, message);
}

/* Sleeps so that the job keeps to sync_speed_max, and to sync_speed_min
 * while the device serves requests (md's two limits). */
static void
pace (EngineSync *s, guint64 bytes)
{
  VbEngine *e = s->engine;
  guint64 io = __atomic_load_n (&e->io_count, __ATOMIC_RELAXED);
  gint64 now = g_get_monotonic_time ();
  guint64 limit;

  if (io != s->io_seen)
    {
      s->io_seen = io;
      s->busy_until = now + BUSY_WINDOW_US;
    }
  /* busy: the minimum, never above the maximum (a minimum of 0: only the
   * maximum); idle: the maximum. 0 in the end: no limit */
  limit = engine_meta_sync_speed (e, TRUE);
  if (now < s->busy_until && engine_meta_sync_speed (e, FALSE) > 0
      && (limit == 0 || engine_meta_sync_speed (e, FALSE) < limit))
    limit = engine_meta_sync_speed (e, FALSE);
  s->paced_bytes += bytes;
  if (limit == 0)
    {
      s->paced_bytes = 0;
      s->pace_start = now;
      return;
    }
  gint64 due = s->pace_start + (gint64) (s->paced_bytes * G_USEC_PER_SEC / limit);
  if (due > now)
    g_usleep (MIN (due - now, G_USEC_PER_SEC));
  if (now - s->pace_start > G_USEC_PER_SEC)
    {
      /* a fresh window each second, so a change of limit acts at once */
      s->pace_start = g_get_monotonic_time ();
      s->paced_bytes = 0;
    }
}

/* Every copy not faulty (one at least) is a hole over the whole piece:
 * they all read as zeroes, equal already. */
static gboolean
piece_all_holes (VbEngine *e, const VbMapping *p)
{
  guint holes = 0;

  for (guint k = 0; k < p->n_copies; k++)
    {
      Component *c = &e->components[p->copies[k].component];
      guint64 run;
      if (engine_is_faulty (c))
        continue;
      if (!engine_component_hole (c, p->copies[k].offset, p->length, &run) || run < p->length)
        return FALSE;
      holes++;
    }
  return holes > 0;
}

/* One piece of the device: read a good copy, then write or compare the
 * others. Returns 0, or -errno when no copy could be read. A resync or
 * rebuild leaves a piece alone where every copy is a hole: copying its
 * zeroes would only fill the holes of sparse files (a new raid1's legs). */
static int
sync_piece (EngineSync *s, const VbMapping *p, gboolean dirty)
{
  VbEngine *e = s->engine;
  gint source = -1;
  int r = -EIO;

  if ((s->op == OP_RESYNC || s->op == OP_REBUILD) && piece_all_holes (e, p))
    return 0;

  for (guint k = 0; k < p->n_copies; k++)
    {
      Component *c = &e->components[p->copies[k].component];
      if (!engine_leg_readable (c))
        continue;
      r = engine_component_pread (c, s->buf[0], p->length, c->data_offset + p->copies[k].offset);
      if (r == 0)
        {
          source = k;
          break;
        }
      engine_component_failed (e, p->copies[k].component, r);
    }
  if (source < 0)
    return r;

  for (guint k = 0; k < p->n_copies; k++)
    {
      guint ci = p->copies[k].component;
      Component *c = &e->components[ci];
      guint64 off = c->data_offset + p->copies[k].offset;
      gboolean write = FALSE;

      if ((gint) k == source || engine_is_faulty (c))
        continue;
      switch (s->op)
        {
        case OP_RESYNC:
          write = TRUE;
          break;
        case OP_REBUILD:
          /* a rebuilt slot gets everything; the others what an unclean
           * stop may have left different */
          write = g_atomic_int_get (&c->rebuilding) ? (c->full_rebuild || dirty) : dirty;
          break;
        case OP_CHECK:
        case OP_REPAIR:
          if (g_atomic_int_get (&c->rebuilding))
            continue;
          if ((r = engine_component_pread (c, s->buf[1], p->length, off)) < 0)
            {
              engine_component_failed (e, ci, r);
              continue;
            }
          for (guint64 b = 0; b < p->length; b += 4096)
            {
              gsize n = MIN (4096, p->length - b);
              if (memcmp (s->buf[0] + b, s->buf[1] + b, n) != 0)
                {
                  s->mismatches++;
                  write = s->op == OP_REPAIR;
                }
            }
          break;
        }
      if (write && (r = engine_component_pwrite (c, s->buf[0], p->length, off)) < 0)
        engine_component_failed (e, ci, r);
    }
  return 0;
}

/* [offset, offset + length) of the device, under the barrier. */
static int
sync_range (EngineSync *s, guint64 offset, guint64 length, gboolean dirty)
{
  VbEngine *e = s->engine;
  int r = 0;

  engine_barrier_close (&e->barrier);
  for (guint64 done = 0; done < length && r == 0;)
    {
      VbMapping p;
      e->driver->map (&e->layout, offset + done, length - done, &p);
      r = sync_piece (s, &p, dirty);
      done += p.length;
    }
  /* what was written is durable before the bits that covered it go
   * (without a bitmap, once at the end of the job) */
  for (guint i = 0; i < e->n && r == 0 && engine_meta_bitmap (e); i++)
    {
      Component *c = &e->components[i];
      int f;
      if (!engine_is_faulty (c) && s->op != OP_CHECK && (f = engine_component_flush (c)) < 0)
        engine_component_failed (e, i, f);
    }
  engine_barrier_open (&e->barrier);
  return r;
}

static gboolean
any_faulty (VbEngine *e)
{
  for (guint i = 0; i < e->n; i++)
    if (engine_is_faulty (&e->components[i]))
      return TRUE;
  return FALSE;
}

/* Chunk @chunk of @bytes is equal on every copy now; its bit goes with the
 * next batch. A batch is cleared at once so that the superblocks record the
 * clearing (events_cleared, see bitmap.h) once per batch, not per chunk. */
static void
chunk_synced (EngineSync *s, guint64 chunk, guint64 bytes)
{
  g_array_append_val (s->synced, chunk);
  s->synced_bytes += bytes;
}

static void
clear_synced (EngineSync *s, gboolean all)
{
  VbBitmap *bm = engine_meta_bitmap (s->engine);

  if (s->synced->len == 0 || (!all && s->synced_bytes < CLEAR_EVERY))
    return;
  /* a bit stays while some copy still misses the chunk */
  if (!any_faulty (s->engine))
    vb_bitmap_clear_chunks (bm, (const guint64 *) s->synced->data, s->synced->len);
  g_array_set_size (s->synced, 0);
  s->synced_bytes = 0;
}

/* A resync or rebuild has made the copies equal below @to. */
static void
advance_frontier (EngineSync *s, guint64 to)
{
  VbEngine *e = s->engine;

  if ((s->op == OP_RESYNC || s->op == OP_REBUILD)
      && __atomic_load_n (&e->resync_frontier, __ATOMIC_ACQUIRE) < to)
    __atomic_store_n (&e->resync_frontier, to, __ATOMIC_RELEASE);
}

/* Runs [from, to) unit by unit; FALSE when cancelled or failed (@err). */
static gboolean
run_region (EngineSync *s, guint64 from, guint64 to, gboolean dirty, int *err)
{
  guint64 unit = UNIT - UNIT % s->engine->block_size;

  for (guint64 off = from; off < to;)
    {
      guint64 len = MIN (unit, to - off);
      if (g_atomic_int_get (&s->cancel))
        return FALSE;
      if ((*err = sync_range (s, off, len, dirty)) < 0)
        return FALSE;
      off += len;
      s->progress += len;
      advance_frontier (s, off);
      if (g_get_monotonic_time () - s->last_report >= REPORT_US)
        report (s, VB_ENGINE_JOB_RUNNING, NULL);
      pace (s, len);
    }
  return TRUE;
}

/* What the job covers: only the dirty chunks where the bitmap knows them
 * and no slot needs every byte. */
static void
plan_job (EngineSync *s)
{
  VbEngine *e = s->engine;
  VbBitmap *bm = engine_meta_bitmap (e);
  guint64 size = e->layout.size;

  s->full = TRUE;
  /* without a bitmap, nothing says where copies differ: a rebuild that
   * starts before a resync has ended (the power went while a slot was
   * being rebuilt, a spare cut a resync short) makes every copy equal too,
   * or reads past its frontier would pick either of two different copies */
  s->unequal = bm == NULL && __atomic_load_n (&e->resync_frontier, __ATOMIC_ACQUIRE) < size;
  if (bm && (s->op == OP_RESYNC || s->op == OP_REBUILD))
    {
      s->full = FALSE;
      for (guint i = 0; i < e->n; i++)
        if (g_atomic_int_get (&e->components[i].rebuilding) && e->components[i].full_rebuild)
          s->full = TRUE;
    }
  /* a rebuild that was stopped goes on where it was: every full
   * rebuild's slot must have got that far */
  s->resume = 0;
  if (s->full && bm && s->op == OP_REBUILD)
    {
      s->resume = G_MAXUINT64;
      for (guint i = 0; i < e->n; i++)
        if (g_atomic_int_get (&e->components[i].rebuilding) && e->components[i].full_rebuild)
          s->resume = MIN (s->resume, e->components[i].rebuild_from);
      if (s->resume == G_MAXUINT64 || s->resume % vb_bitmap_chunk_size (bm) != 0)
        s->resume = 0;
      s->resume = MIN (s->resume, size);
    }
  if (s->full)
    s->bytes = size - s->resume;
  if (!s->full || s->resume > 0)
    {
      guint64 chunk = vb_bitmap_chunk_size (bm);
      for (guint64 c = vb_bitmap_next_dirty (bm, 0); c != G_MAXUINT64;
           c = vb_bitmap_next_dirty (bm, c + 1))
        if (!s->full || c * chunk < s->resume)
          s->bytes += MIN (chunk, size - c * chunk);
    }
}

/* Every chunk of the device (a resync without a bitmap, a full rebuild,
 * a check): where a rebuild resumes, below its point only the dirty ones.
 * FALSE when cancelled or failed (@err). */
static gboolean
run_full (EngineSync *s, int *err)
{
  VbEngine *e = s->engine;
  VbBitmap *bm = engine_meta_bitmap (e);
  guint64 size = e->layout.size;
  guint64 step = bm ? vb_bitmap_chunk_size (bm) : (64ULL << 20);
  /* a full rebuild records how far it got, so that a stop (vblkd
   * killed, a reconfiguration) does not start it over */
  gboolean record = bm && s->op == OP_REBUILD;
  guint64 done_to = 0, recorded = s->resume;
  gboolean ok = TRUE;

  if (s->resume > 0)
    engine_report (e, VB_REPORT_INFO,
                   "rebuild resumes at %" G_GUINT64_FORMAT " bytes (below it, the bitmap's "
                   "dirty chunks)",
                   s->resume);
  for (guint64 off = 0; off < size && ok; off += step)
    {
      guint64 chunk_no = bm ? off / step : 0;
      gboolean dirty
          = bm == NULL ? s->op == OP_RESYNC || s->unequal : vb_bitmap_test (bm, chunk_no);
      if (off + step <= s->resume && !dirty)
        {
          done_to = off + step;
          continue;
        }
      ok = run_region (s, off, MIN (size, off + step), dirty, err);
      if (ok)
        advance_frontier (s, MIN (size, off + step));
      if (ok && bm && dirty && s->op != OP_CHECK)
        {
          chunk_synced (s, chunk_no, MIN (step, size - off));
          clear_synced (s, FALSE);
        }
      if (ok)
        done_to = MIN (size, off + step);
      if (ok && record && done_to < size && done_to >= recorded + RECORD_EVERY && !any_faulty (e))
        {
          engine_meta_rebuild_progress (e, done_to);
          recorded = done_to;
        }
    }
  if (!ok && record && done_to > recorded && !any_faulty (e))
    engine_meta_rebuild_progress (e, done_to);
  return ok;
}

/* The bitmap's dirty chunks only. FALSE when cancelled or failed (@err). */
static gboolean
run_dirty (EngineSync *s, int *err)
{
  VbBitmap *bm = engine_meta_bitmap (s->engine);
  guint64 size = s->engine->layout.size;
  guint64 chunk = vb_bitmap_chunk_size (bm);
  gboolean ok = TRUE;

  for (guint64 c = vb_bitmap_next_dirty (bm, 0); c != G_MAXUINT64 && ok;
       c = vb_bitmap_next_dirty (bm, c + 1))
    {
      ok = run_region (s, c * chunk, MIN (size, (c + 1) * chunk), TRUE, err);
      if (ok)
        {
          chunk_synced (s, c, MIN (chunk, size - c * chunk));
          clear_synced (s, FALSE);
        }
    }
  return ok;
}

/* The job has run to its end: what it wrote is durable before a slot it
 * rebuilt counts as in sync. */
static void
finish_job (EngineSync *s)
{
  VbEngine *e = s->engine;

  if (s->op != OP_CHECK)
    for (guint i = 0; i < e->n; i++)
      {
        Component *c = &e->components[i];
        int f;
        if (!engine_is_faulty (c) && (f = engine_component_flush (c)) < 0)
          engine_component_failed (e, i, f);
      }
  for (guint i = 0; i < e->n; i++)
    if (g_atomic_int_get (&e->components[i].rebuilding))
      {
        e->components[i].full_rebuild = FALSE;
        engine_meta_role_in_sync (e, i);
      }
  if (e->meta)
    engine_meta_sync_incomplete (e, FALSE);
  engine_report (e, VB_REPORT_INFO,
                 "%s finished: %" G_GUINT64_FORMAT " bytes, %" G_GUINT64_FORMAT " mismatches",
                 s->operation, s->progress, s->mismatches);
  report_end (s, VB_ENGINE_JOB_FINISHED, NULL);
}

/* The job stopped before its end: failed (no copy could be read, @err)
 * or cancelled; a resync or rebuild cut short must run again. */
static void
stop_job (EngineSync *s, int err)
{
  VbEngine *e = s->engine;

  if (err < 0)
    {
      g_autofree char *msg = g_strdup_printf ("no copy could be read: %s", g_strerror (-err));
      if (e->meta)
        engine_meta_sync_incomplete (e, TRUE);
      engine_report (e, VB_REPORT_WARNING, "%s failed: %s", s->operation, msg);
      report_end (s, VB_ENGINE_JOB_FAILED, msg);
      return;
    }
  if (e->meta)
    engine_meta_sync_incomplete (e, s->op == OP_RESYNC || s->op == OP_REBUILD);
  engine_report (e, VB_REPORT_INFO,
                 "%s cancelled at %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " bytes",
                 s->operation, s->progress, s->bytes);
  report_end (s, VB_ENGINE_JOB_CANCELLED, "cancelled");
}

static gpointer
sync_thread (gpointer data)
{
  EngineSync *s = data;
  int err = 0;
  gboolean ok = s->full ? run_full (s, &err) : run_dirty (s, &err);

  /* what was made equal before a stop leaves the bitmap too */
  clear_synced (s, TRUE);
  if (ok)
    {
      advance_frontier (s, G_MAXUINT64);
      finish_job (s);
    }
  else
    stop_job (s, err);
  g_atomic_int_set (&s->done, TRUE);
  return NULL;
}

static void
sync_free (EngineSync *s)
{
  g_array_unref (s->synced);
  for (guint i = 0; i < G_N_ELEMENTS (s->buf); i++)
    free (s->buf[i]);
  g_free (s);
}

/* Joins a finished job's thread; called with sync_lock held. */
static void
reap_locked (VbEngine *e)
{
  if (e->sync && g_atomic_int_get (&e->sync->done))
    {
      g_thread_join (e->sync->thread);
      sync_free (e->sync);
      e->sync = NULL;
    }
}

guint64
engine_sync_start (VbEngine *e, const char *operation, gboolean repair)
{
  EngineSync *s;
  guint64 id;

  g_mutex_lock (&e->sync_lock);
  reap_locked (e);
  if (e->sync)
    {
      g_mutex_unlock (&e->sync_lock);
      return 0;
    }
  s = g_new0 (EngineSync, 1);
  s->engine = e;
  s->component = -1;
  s->synced = g_array_new (FALSE, FALSE, sizeof (guint64));
  if (strcmp (operation, "resync") == 0)
    s->op = OP_RESYNC;
  else if (strcmp (operation, "rebuild") == 0)
    s->op = OP_REBUILD;
  else
    s->op = repair ? OP_REPAIR : OP_CHECK;
  s->operation = s->op == OP_RESYNC    ? "resync"
                 : s->op == OP_REBUILD ? "rebuild"
                 : s->op == OP_CHECK   ? "check"
                                       : "repair";
  for (guint i = 0; i < e->n; i++)
    if (g_atomic_int_get (&e->components[i].rebuilding))
      s->component = i;
  s->id = __atomic_fetch_add (&next_job_id, 1, __ATOMIC_RELAXED);
  s->pace_start = s->started = g_get_monotonic_time ();
  /* busy means requests during the job, not before it */
  s->io_seen = __atomic_load_n (&e->io_count, __ATOMIC_RELAXED);
  if (posix_memalign ((void **) &s->buf[0], 4096, UNIT) != 0
      || posix_memalign ((void **) &s->buf[1], 4096, UNIT) != 0)
    g_error ("out of memory");
  e->sync = s;
  id = s->id;
  plan_job (s);
  engine_report (e, VB_REPORT_INFO, "%s started: %" G_GUINT64_FORMAT " bytes%s", s->operation,
                 s->bytes, s->full ? "" : " (the bitmap's dirty chunks)");
  /* reported before the caller goes on: the job exists by the time the
   * request that started it is answered */
  report (s, VB_ENGINE_JOB_RUNNING, NULL);
  s->thread = g_thread_new ("vblk-sync", sync_thread, s);
  g_mutex_unlock (&e->sync_lock);
  return id;
}

static gboolean
engine_sync_running (VbEngine *e)
{
  gboolean running;

  g_mutex_lock (&e->sync_lock);
  running = e->sync != NULL && !g_atomic_int_get (&e->sync->ended);
  g_mutex_unlock (&e->sync_lock);
  return running;
}

/* the bitmap's sweeper */

struct _EngineSweeper {
  GThread *thread;
  GMutex lock;
  GCond cond;
  gboolean stopping;
};

/* Bits are cleared only while every slot is healthy and in sync and no
 * job runs: while one is not, the bits keep what it misses. */
static gboolean
may_clear (VbEngine *e)
{
  return !engine_sync_running (e) && engine_every_leg_readable (e);
}

static gpointer
sweeper_thread (gpointer data)
{
  VbEngine *e = data;
  EngineSweeper *w = e->sweeper;

  g_mutex_lock (&w->lock);
  while (!w->stopping)
    {
      gint64 until = g_get_monotonic_time () + SWEEP_INTERVAL_US;
      if (g_cond_wait_until (&w->cond, &w->lock, until))
        continue;
      g_mutex_unlock (&w->lock);
      vb_bitmap_sweep (engine_meta_bitmap (e), may_clear (e));
      g_mutex_lock (&w->lock);
    }
  g_mutex_unlock (&w->lock);
  return NULL;
}

static void
sweeper_start (VbEngine *e)
{
  EngineSweeper *w;

  if (engine_meta_bitmap (e) == NULL || e->read_only || e->sweeper)
    return;
  w = g_new0 (EngineSweeper, 1);
  g_mutex_init (&w->lock);
  g_cond_init (&w->cond);
  e->sweeper = w;
  w->thread = g_thread_new ("vblk-sweep", sweeper_thread, e);
}

void
engine_sweeper_stop (VbEngine *e)
{
  EngineSweeper *w = e->sweeper;

  if (w == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->stopping = TRUE;
  g_cond_signal (&w->cond);
  g_mutex_unlock (&w->lock);
  g_thread_join (w->thread);
  g_mutex_clear (&w->lock);
  g_cond_clear (&w->cond);
  g_free (w);
  e->sweeper = NULL;
}

int
vb_engine_settle (VbEngine *e)
{
  VbBitmap *bm = engine_meta_bitmap (e);

  if (e->read_only || !e->redundant)
    return 0;
  if (e->meta == NULL)
    return -ENOTSUP;
  if (!may_clear (e))
    return -EBUSY;
  if (bm == NULL)
    {
      /* (a resync cut short runs again in full) */
      if (engine_meta_needs_sync (e))
        return -EBUSY;
      /* no write in flight while the superblocks say clean */
      engine_barrier_close (&e->barrier);
      for (guint i = 0; i < e->n; i++)
        if (!engine_is_faulty (&e->components[i]))
          engine_component_flush (&e->components[i]);
      engine_meta_mark_clean (e);
      engine_barrier_open (&e->barrier);
      return engine_every_leg_readable (e) ? 0 : -EBUSY;
    }
  for (guint i = 0; i < e->n; i++)
    if (!engine_is_faulty (&e->components[i]))
      engine_component_flush (&e->components[i]);
  /* as a stop's: the first ages the bits of the last writes, the second
   * clears every bit with no write in flight */
  vb_bitmap_sweep (bm, FALSE);
  vb_bitmap_sweep (bm, may_clear (e));
  return vb_bitmap_count_dirty (bm) == 0 ? 0 : -EAGAIN;
}

void
engine_sync_start_needed (VbEngine *e, gboolean need)
{
  gboolean rebuild = FALSE;

  sweeper_start (e);
  if (!need || e->read_only || !e->redundant)
    return;
  /* a component behind (new, or re-added through the bitmap) makes it a
   * rebuild; equal copies after an unclean stop a resync */
  for (guint i = 0; i < e->n; i++)
    rebuild |= g_atomic_int_get (&e->components[i].rebuilding) != 0;
  engine_sync_start (e, rebuild ? "rebuild" : "resync", FALSE);
}

/* Stops the running job (if any) and waits for its thread. */
void
engine_sync_stop (VbEngine *e)
{
  EngineSync *s;

  g_mutex_lock (&e->sync_lock);
  s = e->sync;
  e->sync = NULL;
  g_mutex_unlock (&e->sync_lock);
  if (s == NULL)
    return;
  g_atomic_int_set (&s->cancel, 1);
  g_thread_join (s->thread);
  sync_free (s);
}

gint64
vb_engine_check (VbEngine *e, gboolean repair)
{
  guint64 id;

  if (!e->redundant)
    return -ENOTSUP;
  if (e->read_only && repair)
    return -EROFS;
  id = engine_sync_start (e, "check", repair);
  return id ? (gint64) id : -EBUSY;
}

int
vb_engine_cancel_job (VbEngine *e, guint64 id)
{
  int r = -ESRCH;

  g_mutex_lock (&e->sync_lock);
  if (e->sync && e->sync->id == id && !g_atomic_int_get (&e->sync->ended))
    {
      g_atomic_int_set (&e->sync->cancel, 1);
      r = 0;
    }
  g_mutex_unlock (&e->sync_lock);
  return r;
}
