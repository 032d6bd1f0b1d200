/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", md part: what its files share. An MdArray is one md
 * array vblkd runs or watches: its members by slot, vblk's superblock
 * (the role table) when it carries vblk's metadata, the job md runs, and
 * the status the main thread reads without waiting on the array's I/O.
 * Functions named _locked are called with a->lock held. */
#pragma once

#include "backend.h"
#include "superblock.h"
#include "vb-error.h"

#include <sys/types.h>

G_BEGIN_DECLS

#define MD_NAME_PREFIX "md_vb"
#define MD_METADATA "external:vblk"
#define NEW_ARRAY "/sys/module/md_mod/parameters/new_array"
/* Linux 7.x: whether a stopped array's disk is kept (Y, the default) */
#define LEGACY_DEL_GENDISK "/sys/module/md_mod/parameters/legacy_async_del_gendisk"
#define SECTOR 512
#define IDLE_TICK_MS 2000
#define JOB_TICK_MS 500
#define CLEAR_TRIES 50 /* × 100 ms: udev's probe may hold the node a moment */

typedef struct {
  char *path;  /* the component as the request names it */
  char *uuid;  /* its component UUID */
  char *node;  /* the block device md holds: the component or a loop over it */
  char *kname; /* its kernel name: md's dev-KNAME */
  dev_t devnum;
  int fd;              /* the node, O_DIRECT: superblocks; -1 */
  gboolean failed;     /* md marked it faulty; recorded */
  gboolean removed;    /* no longer in md */
  gboolean rebuilding; /* md recovers it */
} Member;

/* A slot as status calls see it. */
typedef struct {
  /* its component went away (or was not there at the start), not failed
   * by md or an administrator: a re-add takes it when it comes back */
  gboolean missing;
  gboolean healthy;    /* in md, in sync */
  gboolean faulty;     /* failed, recorded */
  gboolean rebuilding; /* md recovers it */
  char *errors;        /* its md attribute dev-KNAME/errors, or NULL */
} SlotStatus;

typedef struct {
  char *md;           /* "md_vb…" */
  char *block_device; /* "/dev/md_vb…" */
  char *sysdir;       /* /sys/block/MD/md */
  char *name, *uuid, *instance, *driver;
  guint n;                 /* slots */
  guint copies;            /* of every chunk: raid1 n, raid10 its copies, raid0 1 */
  gboolean meta;           /* vblk superblocks on the components */
  gboolean native;         /* md1: md's own superblocks, which md keeps */
  char *md_version;        /* native: "1.2" */
  guint32 next_dev_number; /* native: above every role-table entry handed to a spare */
  gboolean read_only;
  gint refs;   /* the table's, and each caller's between lookup_array and array_unref */
  GMutex lock; /* the members and superblocks; held across their I/O */
  /* what status calls from the main thread read, never held across I/O
   * (publish_status_locked copies it from the members) */
  GMutex status_lock;
  SlotStatus *status;
  VbSuperblock sb;  /* meta: the role table, events, clean */
  Member **members; /* per slot; NULL: nothing there */
  GPtrArray *spare_paths, *spare_uuids;
  GThread *thread;
  int wake; /* eventfd */
  gboolean stopping;
  /* the job md runs, as reported */
  guint64 job_id;
  char *job_op;
  gint job_slot;
  char *job_component;
  guint64 job_bytes, job_done;
  gboolean job_seen, job_cancel;
  gint64 job_asked; /* µs: check/repair asked or md began a rebuild, not reported yet */
} MdArray;

/* ---- md-array.c: an array, its members, md's sysfs ---- */

/* RUN_DIR/md/MD: the full UUID and name of the array's device. */
char *md_run_file (const char *md);
/* md's attribute @attr of the array (relative to /sys/block/MD/md):
 * written (negative errno), read (stripped; NULL when unreadable). */
int md_set (MdArray *a, const char *attr, const char *value);
int md_set_u64 (MdArray *a, const char *attr, guint64 value);
char *md_get (MdArray *a, const char *attr);
/* "dev-KNAME/ATTR" of member @m */
char *md_dev_attr (const Member *m, const char *attr);
/* Whether comma-separated @list (md's state words) holds @word. */
gboolean md_has_word (const char *list, const char *word);
/* A member over block node @node (the component, or a loop over it);
 * with @meta, its node opened O_DIRECT for the superblocks. */
Member *md_member_new (const char *path, const char *uuid, const char *node, gboolean meta,
                       GError **error);
void md_member_free (Member *m);
/* A member md removed: its superblock fd closed, a loop device of ours
 * under it detached. */
void md_member_let_go_locked (MdArray *a, guint slot);
gboolean md_member_healthy (const Member *m);

MdArray *md_array_new (const char *instance, const char *uuid, const char *name, const char *driver,
                       guint n);
void md_array_unref (MdArray *a);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MdArray, md_array_unref)
/* Wakes the array's monitor for a look. */
void md_wake (MdArray *a);
/* TRUE when every chunk keeps a healthy copy with slot @without (-1:
 * none) failed too. */
gboolean md_every_chunk_has_a_copy (MdArray *a, const gboolean *healthy, gint without);
/* The members' state, for the status calls. */
void md_publish_status_locked (MdArray *a);
/* The table of arrays by block node: it takes a reference of its own;
 * lookup gives the caller one (md_array_unref), or NULL. */
void md_register_array (MdArray *a);
void md_unregister_array (MdArray *a);
MdArray *md_lookup_array (const char *block_device);
/* array_state=clear, retried while udev's probe holds the node. */
int md_clear_array (MdArray *a);
/* Reads @attr and adds it to what the monitor waits on (@pfds). */
char *md_watch (MdArray *a, const char *attr, GArray *pfds);

/* ---- md-superblocks.c: vblk's metadata on the members ---- */

/* The current superblock to every member that has not failed, events
 * counted up. FALSE when no member took it. */
gboolean md_write_all_locked (MdArray *a);
/* vblk's bitmap area of @m all set (@dirty) or all clear. */
void md_write_bitmap (MdArray *a, Member *m, gboolean dirty);
/* The newest superblock's role table decides each member's state. */
gboolean md_assemble (MdArray *a, const VbBackendRequest *request, const VbLayout *layout,
                      GError **error);

/* ---- md-members.c: failures, re-adds and spares while it runs ---- */

gboolean md_record_failure_locked (MdArray *a, guint slot, const char *why, gboolean requested);
gboolean md_add_member_locked (MdArray *a, guint slot, const char *path, const char *uuid,
                               GError **error);
gboolean md_take_spare_locked (MdArray *a, guint slot);
/* A member md removed is let go; with @take_spare a spare takes its slot. */
void md_member_gone_locked (MdArray *a, guint slot, gboolean take_spare);

/* ---- md-jobs.c: md's jobs ---- */

/* md's sync_action as a job, reported as the engine reports its jobs. */
void md_jobs_locked (MdArray *a, GArray *pfds);
/* VbEngineDeviceOps.check and .cancel_job of md arrays. */
gboolean md_check (const char *block_device, gboolean repair, guint64 *job, GError **error);
gboolean md_cancel_job (const char *block_device, guint64 job, GError **error);

/* ---- md-monitor.c ---- */

/* The members' states answered (failures recorded, removals, spares);
 * TRUE when something was done. */
gboolean md_members_locked (MdArray *a, GArray *pfds);
void md_monitor_start (MdArray *a);
void md_monitor_stop (MdArray *a);

/* ---- md-assemble.c ---- */

/* VbBackend.start of the md part. */
char *md_start_array (const VbBackendRequest *request, GError **error);
/* The array @md of @instance found running, with its members (NULL: not
 * one of vblkd's, or its run file is gone). */
MdArray *md_attach_running (const char *md, const char *instance);

G_END_DECLS
