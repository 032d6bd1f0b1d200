/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine: vblk's own data path. One VbEngine runs one started device:
 * its driver's placement, over its components, with io_uring on each
 * serving thread. Servers reach it asynchronously (vb_engine_submit on a
 * ring of their own: ublk, FUSE, NBD) or through the blocking
 * vb_engine_ops (jobs, a device stacked on this one, tests). */
#pragma once

#include <glib.h>

#include "block-ops.h"
#include "driver.h"
#include "engine-ring.h"

G_BEGIN_DECLS

typedef struct _VbEngine VbEngine;

/* A component is a path (file or block device), or another block device
 * served in this process (vblk:NAME on the engine: called in place). */
typedef struct {
  const char *path;
  const VbBlockOps *ops;
  void *handle;
  /* an engine being replaced (online reconfiguration) hands over its open
   * fd of a component it keeps: duplicated rather than opened again, so
   * the claim it holds on a block device (O_EXCL) carries over */
  gboolean has_fd;
  int fd;
} VbEngineSource;

/* Who the device and its components are, for on-component metadata
 * (metadata=vblk): UUIDs from the desired state, and the spares that a
 * failed slot is rebuilt onto. */
typedef struct {
  const char *uuid;
  const char *const *component_uuids; /* one per slot */
  guint n_spares;
  const char *const *spare_paths;
  const char *const *spare_uuids;
  /* A reconfiguration: the role table follows @component_uuids (each
   * component keeps its state under its UUID; a new one is rebuilt), not
   * the slot count of the superblocks. */
  gboolean reconfigure;
  /* metadata=none: the slots whose copy is behind (rebuilt in full at
   * activation), as the desired state records them; NULL: none. */
  const gboolean *out_of_sync;
  /* metadata=none: the slots that failed, which stay faulty (neither read
   * nor written) until a re-add; NULL: none. */
  const gboolean *failed;
  /* Errors counted so far per slot (a reconfiguration carries the running
   * engine's counts over); NULL: none. */
  const guint64 *errors;
} VbEngineIdentity;

/* A job of the engine (resync, rebuild, check, repair) as it goes. */
typedef enum {
  VB_ENGINE_JOB_RUNNING,
  VB_ENGINE_JOB_FINISHED,
  VB_ENGINE_JOB_CANCELLED,
  VB_ENGINE_JOB_FAILED,
} VbEngineJobState;

typedef struct {
  guint64 id;         /* unique in the process */
  const char *device; /* the engine's name: the device's */
  const char *operation;
  VbEngineJobState state;
  guint64 bytes; /* to process */
  guint64 done;
  guint64 mismatches;
  gint component;             /* the slot being rebuilt, or -1 */
  const char *component_uuid; /* the component in that slot now */
  const char *message;
} VbEngineJob;

/* Called on the job's thread; must not block. */
typedef void (*VbEngineJobFunc) (VbEngine *engine, const VbEngineJob *job, gpointer user_data);

/* Called on an I/O thread when a component turns faulty; must not block. */
typedef void (*VbEngineFailureFunc) (VbEngine *engine, guint component, int error,
                                     gpointer user_data);

/* What an administrator must see as it happens (a component failed and
 * was recorded, a job started or ended, what assembly decided of a slot, a
 * spare taking a slot, a superblock that could not be written) the engine
 * does not log: it reports it (vb-report.h), the subject the device's name. */

VbEngine *vb_engine_new (const char *name, const VbDriver *driver, GHashTable *attributes,
                         guint n_components, const VbEngineSource *sources,
                         const VbComponentInfo *infos, const VbEngineIdentity *identity,
                         gboolean read_only, GError **error);
void vb_engine_free (VbEngine *engine);
/* The path of the component in slot @component now (a spare that took the
 * slot, say), newly allocated; safe from any thread. */
char *vb_engine_component_path_dup (VbEngine *engine, guint component);
/* The open fd of @component, or -1 (in process, missing, or let go of). */
int vb_engine_component_fd (VbEngine *engine, guint component);
/* Frees without a clean stop: the superblocks keep saying unclean and the
 * bitmap keeps its bits (a device formatted at creation, resynced when
 * it first starts). */
void vb_engine_free_unclean (VbEngine *engine);

void vb_engine_set_failure_func (VbEngine *engine, VbEngineFailureFunc func, gpointer user_data);
/* Set before vb_engine_activate, which starts any resync or rebuild that
 * assembly found necessary. */
void vb_engine_set_job_func (VbEngine *engine, VbEngineJobFunc func, gpointer user_data);
void vb_engine_activate (VbEngine *engine);
/* Before a swap: the job that runs is cancelled, no spare is taken and
 * the bitmap is no longer swept, so that nothing but requests touches the
 * components; vb_engine_resume starts them again (a swap rolled back). */
void vb_engine_quiesce (VbEngine *engine);
void vb_engine_resume (VbEngine *engine);
/* Readable: neither faulty nor behind a rebuild. */
gboolean vb_engine_component_in_sync (VbEngine *engine, guint component);
/* Online attributes (sync speeds, injected faults). */
void vb_engine_update (VbEngine *engine, GHashTable *attributes);
/* Check (compare every copy; @repair rewrites mismatches from the first
 * copy): the job's id, -ENOTSUP without redundancy, -EBUSY while another
 * job runs. */
gint64 vb_engine_check (VbEngine *engine, gboolean repair);
/* A device that goes on serving made as a stop leaves it (a shutdown's
 * last step, with the file system on it read-only): every leg flushed and
 * the bitmap's bits cleared — without a bitmap, the superblocks marked
 * clean until the next write — so that the power going next costs no
 * resync. 0; -ENOTSUP without metadata, -EBUSY while a leg is not in sync
 * or a job runs (the bits keep what it misses; without a bitmap, a resync
 * cut short), -EAGAIN while writes are in flight. */
int vb_engine_settle (VbEngine *engine);
/* -ESRCH when job @id is not running. */
int vb_engine_cancel_job (VbEngine *engine, guint64 id);
gboolean vb_engine_component_rebuilding (VbEngine *engine, guint component);
/* Faulty because its component went away (at runtime, or not there at
 * the start): re-added when it comes back. A failed one is not. */
gboolean vb_engine_component_missing (VbEngine *engine, guint component);
/* Puts @source back into faulty slot @slot (mdadm --re-add): a component
 * of this device that was in that slot gets only the bitmap's dirty
 * chunks, a blank one every byte (a replacement: it takes @uuid when not
 * NULL); the rebuild runs as a job. */
int vb_engine_readd (VbEngine *engine, guint slot, const VbEngineSource *source, const char *uuid,
                     GError **error);
/* A faulty component's file is let go (a disk being removed; its slot is
 * missing from now on); blocks on the writes in flight. */
void vb_engine_release_component (VbEngine *engine, guint component);
/* Replaces the spares (metadata=vblk only; ignored otherwise). */
void vb_engine_set_spares (VbEngine *engine, guint n, const char *const *paths,
                           const char *const *uuids);

const char *vb_engine_name (VbEngine *engine);
const char *vb_engine_component_path (VbEngine *engine, guint component);
guint vb_engine_n_components (VbEngine *engine);
gboolean vb_engine_component_faulty (VbEngine *engine, guint component);
guint64 vb_engine_component_errors (VbEngine *engine, guint component);
/* Whether some byte has no healthy copy left (writes are then refused). */
gboolean vb_engine_lost_data (VbEngine *engine);
/* Whether every byte still has a healthy copy with @component gone too. */
gboolean vb_engine_can_lose (VbEngine *engine, guint component);
/* Whether requests with a kernel buffer (VbEngineIo.kernel_buf) can be served:
 * every component is a file or block device of its own (not one served in
 * place by this process, whose functions take memory). */
gboolean vb_engine_zero_copy_ok (VbEngine *engine);
/* Marks @component faulty (SetFaulty); -EBUSY when it holds the last copy
 * of some data, -ENOTSUP without redundancy. The failure function hears
 * -ECANCELED. */
int vb_engine_set_faulty (VbEngine *engine, guint component);

/* The blocking entry points: a request on a ring of the calling thread's
 * own (engine-io-sync.c), waited for. */
extern const VbBlockOps vb_engine_ops;
/* vb_engine_ops' extents (engine-extents.c): holes where every readable
 * copy is a hole in its file, else data. */
int vb_engine_extents (VbEngine *engine, guint64 offset, guint64 length, guint64 *run,
                       guint32 *flags);

/* The asynchronous data path. A request is the caller's storage, one per
 * tag of a queue: made once with vb_engine_io_init, submitted any number
 * of times (one submission at a time), never allocated per request. */
typedef enum {
  VB_ENGINE_IO_READ,
  VB_ENGINE_IO_WRITE,
  VB_ENGINE_IO_FLUSH,
  VB_ENGINE_IO_DISCARD,
  VB_ENGINE_IO_WRITE_ZEROES,
} VbEngineIoKind;

typedef struct _VbEngineIo VbEngineIo;

/* Runs once per submission, on the ring's thread: 0 or -errno. */
typedef void (*VbEngineIoFunc) (VbEngineIo *io, int res);

struct _VbEngineIo {
  VbEngineIoKind kind;
  void *buf; /* read into, written from (reads and writes) */
  /* TRUE (reads and writes): the data is not in this process's memory but
   * the kernel's buffer of the request, registered in the ring's buffer
   * table at @kernel_buf_index (ublk's automatic buffer registration: zero
   * copy); @buf is unused and the engine moves the data with fixed-buffer
   * reads and writes only. */
  gboolean kernel_buf;
  guint kernel_buf_index;
  guint64 offset;
  guint64 length;
  gboolean fua; /* writes and write-zeroes: durable before done */
  VbEngineIoFunc done;
  gpointer user_data;
  struct _EngineIoState *state; /* the engine's */
  /* the engine switch's, while it passes the request on */
  VbEngineIoFunc caller_done;
  VbRingOp held;
  VbRing *ring;
  void *switch_;
  struct _VbEngineIo *held_next;
};

void vb_engine_io_init (VbEngineIo *io);
void vb_engine_io_clear (VbEngineIo *io);
/* Starts @io on @engine; its component I/O goes into @ring, whose thread
 * must go on running it (vb_ring_run) until @io->done has run. What may
 * block (a superblock written after a failure, a new bitmap bit made
 * durable, a trim) runs on a worker and comes back through the ring. */
void vb_engine_submit (VbEngine *engine, VbRing *ring, VbEngineIo *io);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbEngine, vb_engine_free)

G_END_DECLS
