/* The engine's insides, shared by engine.c (the data path),
 * engine-meta.c (on-component metadata and failure recording) and
 * engine-sync.c (bitmap, resync, rebuild and check jobs). */
#pragma once

#include "assembly.h"
#include "bitmap.h"
#include "engine.h"
#include "fault.h"
#include "metadata.h"
#include "superblock.h"

#include <glib.h>

#define RING_ENTRIES 128
#define BUFFER_ALIGN 4096
#define MAX_PIECES 256 /* per batch; a longer request is done in batches */
#define ZERO_CHUNK (1u << 20)

typedef struct {
  char *path;
  int fd;                /* -1 for an in-process component */
  const VbBlockOps *ops; /* in-process component */
  void *handle;
  gboolean is_block;
  guint64 size;        /* bytes of its data area, as probed at start */
  gboolean direct;     /* opened O_DIRECT */
  guint64 data_offset; /* where the data area starts */
  gint faulty;         /* atomic */
  guint64 errors;      /* atomic */
  /* with metadata */
  char *uuid;            /* component UUID */
  gint recorded;         /* atomic: its failure is in the survivors' superblocks */
  gint rebuilding;       /* atomic: written, never read (behind a rebuild or re-add) */
  gboolean missing;      /* not there at start (no fd, no ops) */
  gboolean released;     /* faulty, fd pointed at /dev/null */
  gboolean full_rebuild; /* new to its slot: every byte is copied, not just dirty chunks */
  guint64 rebuild_from;  /* full rebuild: below this device offset it already has the data
                            (a rebuild that was stopped), only dirty chunks are copied */
} Component;

typedef struct _VbEngineMeta VbEngineMeta;

struct _VbEngine {
  char *name;
  const VbDriver *driver;
  VbLayout layout;
  guint32 block_size;
  gboolean read_only;
  gboolean redundant; /* every piece has more than one copy */
  guint n;
  Component *components;
  guint rr; /* atomic: read balancing */
  VbEngineFailureFunc failure_func;
  gpointer failure_data;
  VbEngineJobFunc job_func;
  gpointer job_data;
  VbFault *fault;     /* driver "faulty": injected errors and latency */
  VbEngineMeta *meta; /* NULL without on-component metadata */
  /* Writes hold it shared; a resync, rebuild or check step holds it
   * exclusively while it copies, so no write lands between its read and
   * its write. */
  GRWLock barrier;
  gint lost;        /* atomic: some data has no healthy copy (failed) */
  guint64 io_count; /* atomic: requests served, so that jobs see a busy device */
  GMutex sync_lock; /* the job below */
  struct _EngineSync *sync;
  GThread *spare_thread; /* a spare taking a failed slot */
  /* held from the check that a slot is faulty to its new component's
   * install: a spare taking it and a re-add of its old component never
   * both take one slot */
  GMutex slot_lock;
  gboolean need_rebuild; /* metadata=none: a slot behind at start */
  GArray *kept_fds;      /* metadata=none: fds of replaced components, closed at the end */
  gint quiesced;         /* atomic: no spare is taken (a swap is under way) */
  guint64 speed_min, speed_max; /* atomic: sync_speed_min/max, bytes per second */
};

gboolean engine_is_faulty (Component *c);

/* Known to be in sync: neither faulty nor behind a rebuild or resync. The
 * one test that decides which copies may be read (DESIGN.md: a leg not
 * known to be in sync is never read); what puts a leg behind is the
 * assembly rule (assembly.h), at start and at a re-add. */
static inline gboolean
engine_leg_readable (Component *c)
{
  return !g_atomic_int_get (&c->faulty) && !g_atomic_int_get (&c->rebuilding);
}
/* I/O on one component outside io_uring (metadata, sync jobs); 0 or -errno. */
int engine_component_pread (Component *c, void *buf, guint64 length, guint64 offset);
int engine_component_pwrite (Component *c, const void *buf, guint64 length, guint64 offset);
int engine_component_flush (Component *c);
void engine_component_failed (VbEngine *e, guint i, int err);

/* engine-meta.c */
/* The assembly rule (assembly.h) for a component re-added into faulty slot
 * @slot, from its own superblock (@own; NULL: blank). */
VbSlotDecision engine_meta_decide_readd (VbEngine *e, guint slot, const VbSuperblock *own,
                                         char **why);
gboolean engine_meta_assemble (VbEngine *e, const VbEngineIdentity *identity,
                               GHashTable *attributes, GError **error);
void engine_meta_free (VbEngine *e);
/* The next close writes nothing (vb_engine_free_unclean). */
void engine_meta_forget (VbEngine *e);
/* @i just turned faulty: the survivors' superblocks say so before this
 * returns (or they turn faulty too). */
void engine_meta_record_failure (VbEngine *e, guint i);
/* Blocks while @i is faulty but its failure not yet recorded. */
void engine_meta_wait_recorded (VbEngine *e, guint i);
/* Writes every healthy component's superblock after a state change. */
void engine_meta_update (VbEngine *e);
/* A clean stop: superblocks say clean. */
void engine_meta_close (VbEngine *e);
int engine_meta_write_begin (VbEngine *e, guint64 offset, guint64 length);
void engine_meta_write_end (VbEngine *e, guint64 offset, guint64 length);
/* What the data path needs quickly. */
gboolean engine_meta_active (VbEngine *e);
const char *engine_meta_device_uuid (VbEngine *e);
const VbMetadataHandler *engine_meta_handler (VbEngine *e);
/* For engine-sync.c */
VbBitmap *engine_meta_bitmap (VbEngine *e);
void engine_meta_role_in_sync (VbEngine *e, guint i);
guint64 engine_meta_sync_speed (VbEngine *e, gboolean max);
void engine_meta_sync_incomplete (VbEngine *e, gboolean incomplete);
void engine_meta_set_attributes (VbEngine *e, GHashTable *attributes);
void engine_meta_set_speeds (VbEngine *e, guint64 min, guint64 max);
/* A full rebuild has copied everything below @offset (durably): the
 * superblocks say so, so that a stopped rebuild resumes there (0: done). */
void engine_meta_rebuild_progress (VbEngine *e, guint64 offset);
/* The sweeper stops (quiesce) and starts again. */
void engine_meta_stop_sweeper (VbEngine *e);
void engine_meta_start_sweeper (VbEngine *e);
/* Whether a job must run: a slot behind, or dirty bits. */
gboolean engine_meta_needs_sync (VbEngine *e);

/* engine-sync.c */
/* Starts a job: "resync", "rebuild", "check" or "repair"; returns its id,
 * or 0 when one runs. */
guint64 engine_sync_start (VbEngine *e, const char *operation, gboolean repair);
/* @i failed: a spare (if any) takes its slot and is rebuilt (own thread). */
void engine_sync_take_spare (VbEngine *e, guint i);
void engine_sync_join_spare (VbEngine *e);
/* For engine-sync.c: the next spare, removed from the list (NULL: none). */
gboolean engine_meta_has_spare (VbEngine *e);
gboolean engine_meta_pop_spare (VbEngine *e, char **path, char **uuid);
void engine_meta_keep_fd (VbEngine *e, int fd);
void engine_meta_set_role (VbEngine *e, guint i, const char *uuid, VbRoleState state);
void engine_sync_stop (VbEngine *e);
/* The bitmap's sweeper, and when @need the job that makes the copies
 * equal: a rebuild where a slot is behind, else a resync. */
void engine_sync_start_needed (VbEngine *e, gboolean need);
gboolean engine_sync_running (VbEngine *e);
