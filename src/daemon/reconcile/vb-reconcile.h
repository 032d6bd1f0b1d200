/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reconciler's face: vblkd's state (desired, observed, status) and the
 * one path every change takes — validate -> persist -> reconcile ->
 * publish. What talks D-Bus (../bus) submits ops here and registers a
 * VbPublish through which the reconciler reports; nothing here knows
 * D-Bus. */
#pragma once

#include <gio/gio.h>

#include "backend.h"
#include "vb-error.h"
#include "vb-graph.h"
#include "vb-plan.h"
#include "vb-state.h"
#include "vb-state-store.h"
#include "vb-util.h"

G_BEGIN_DECLS

/* Per device, what D-Bus shows beyond the desired state. */
typedef struct {
  gboolean was_started; /* "stopped" rather than "ready" when not running */
  char *failure;        /* why the last start failed ("failed"), or NULL */
  guint64 size;         /* from the last probe */
  gboolean complete;    /* enough components to start */
  guint64 missing;      /* bit i: component i's path was not there at the last probe */
  /* a device not running: what its metadata says of its slots (the
   * newest superblock's role table, or the desired state without one) */
  guint64 faulty;     /* bit i: component i failed and stays out until re-added */
  guint64 rebuilding; /* bit i: component i is behind: a start rebuilds it */
} VbDeviceStatus;

void vb_device_status_free (VbDeviceStatus *status);

typedef struct _VbDaemon VbDaemon;
typedef struct _VbBus VbBus;       /* ../bus/vb-bus.h: what talks D-Bus */
typedef struct _VbPolicy VbPolicy; /* vb-policy.h */

/* How the reconciler reports to what shows the state (the bus side
 * registers one; main thread). */
typedef struct {
  /* desired or observed state changed: what shows it is rebuilt */
  void (*sync) (VbDaemon *daemon);
  /* only the devices in set @names (name -> anything), which holds every
   * dependent of each */
  void (*sync_devices) (VbDaemon *daemon, GHashTable *names);
  /* something happened to @device (NULL: to vblkd); @details a{sv} or
   * NULL, floating is taken */
  void (*event) (VbDaemon *daemon, const char *kind, const char *device, GVariant *details);
} VbPublish;

struct _VbDaemon {
  char *state_dir;
  char *state_path;
  VbStateStore *store; /* state.json and its journal */
  char *run_dir;
  char *dev_dir;
  char *instance;         /* tags the block nodes of this state dir */
  int lock_fd;            /* flock of the state dir */
  gboolean fresh_run_dir; /* first vblkd since boot: autostart applies */
  char *state_stamp;      /* --takeover: vb_state_stamp as loaded */
  gboolean memory_locked; /* --takeover: mlockall until the devices are up */

  /* its device configs are replaced, never edited in place: each op's
   * snapshot of it shares them (vb_state_share) */
  VbState *desired;
  GHashTable *running; /* uuid -> VbRunning* (observed) */
  GHashTable *status;  /* name -> VbDeviceStatus* */

  VbBus *bus;               /* what talks D-Bus; opaque here */
  const VbPublish *publish; /* how the reconciler reports (set by the bus side) */
  VbPolicy *policy;         /* the rules in force, never NULL once loaded */
  char *policy_dir;         /* where they are read from */
  char **policy_dirs;       /* policy_dir, then the vendor's (files of the first win) */

  GQueue ops;               /* VbOp* waiting; those on disjoint parts of the graph run together */
  GPtrArray *running_ops;   /* VbOp* whose worker runs */
  GHashTable *reconfigured; /* name -> the configuration before a reconfiguration whose
                               rebuild still runs (for show) */
  gboolean dispatching;     /* the reconciler is looking for ops to start */
  gboolean dispatch_again;  /* an op came meanwhile */
  gboolean quit_pending;    /* SIGTERM arrived while an op ran */

  /* The workers' side, under world_lock: what state.json holds and what
   * is served (exports, links), each op's part merged in as it goes, so
   * that ops running side by side never write back one another's stale
   * copies. */
  GRecMutex world_lock;
  VbState *world_desired;    /* configs replaced, never edited (as desired's) */
  GHashTable *world_running; /* uuid -> VbRunning* */
  GHashTable *exports;       /* uuid -> NBD export runtime (vb-exports.c) */
  int exit_status;
  gboolean shutting_down;
  gboolean handover; /* leaving for another vblkd (a takeover): no staying */
  gint settle_asked; /* SIGUSR2 (vblk.shutdown): the next shutdown op settles */
  /* At a stop: devices still in use whose writes wait for this vblkd
   * (VbEngineDeviceOps.needs_server); it stays for them. The shutdown op
   * sets it; the main thread reads it once that op is done. */
  char **lingering;
  GMainLoop *loop;
};

/* Reports through daemon->publish (nothing when none is registered). */
void vb_daemon_publish_sync (VbDaemon *daemon);
void vb_daemon_publish_sync_devices (VbDaemon *daemon, GHashTable *names);
void vb_daemon_publish_event (VbDaemon *daemon, const char *kind, const char *device,
                              GVariant *details);

/* vb-reconciler.c */
typedef struct _VbOp VbOp;
typedef void (*VbOpDone) (VbDaemon *daemon, const GError *error, gpointer user_data);

/* Changes the desired state: @mutate runs on the main thread when the op's
 * turn comes, on a copy of the desired state, does the pure checks and
 * records in its VbOpIntent the devices it changes (touched) and what the
 * worker is to do beyond the plan. Then, on a worker thread: touched
 * devices are probed and checked against their real components (on any
 * error nothing is saved or changed), the state is saved, the plan
 * executed, and a touched device whose step failed is rolled back to its
 * previous configuration (saved again). @done runs on the main thread
 * with the first such error, or NULL. A NULL @mutate re-drives the
 * current desired state. */
typedef enum {
  VB_OP_CHANGE,      /* a request: check, save, execute the plan */
  VB_OP_STARTUP,     /* find the running block nodes again, then as CHANGE */
  VB_OP_OBSERVE,     /* find them again and publish; no plan, no save */
  VB_OP_SHUTDOWN,    /* vblkd exits: stop exports and the nodes it serves itself */
  VB_OP_POLICY,      /* as CHANGE, for the policy engine: component paths found by their
                        superblocks (another device naming the same path is stale) */
  VB_OP_RECONFIGURE, /* as CHANGE, but the desired state is saved only once the device's
                        engine was swapped (vb-reconfig-run.c) */
  VB_OP_CHECK,       /* only the checks of CHANGE (Apply's, of its whole plan, before its
                        first step): nothing is saved, done or shown */
} VbOpMode;

/* What a mutate asks of its op beyond the new desired state; the op's
 * worker does it. */
typedef struct {
  GPtrArray *touched; /* names of the devices the request changes */
  GArray *readds;     /* VbOpReadd */
  GArray *faults;     /* VbOpFault */
  char *reconfigure;  /* the device a Reconfigure swaps online, or NULL */
  guint reconfigure_timeout_ms;
  /* the policy's: the paths where it found components by their
   * superblocks (the only ones it claims; a path it moved a component
   * to because another took its old one is a guess, not a claim) */
  GHashTable *found;
} VbOpIntent;

/* A re-add: slot @slot of started device @device takes its component back. */
typedef struct {
  char *device;
  guint slot;
} VbOpReadd;

/* A component fails (SetFaulty); with @gone_node, because that node went
 * away: the engine lets go of it too, unless another component has taken
 * the slot meanwhile. */
typedef struct {
  char *device;
  guint index;
  char *gone_node;
} VbOpFault;

/* vb-op.c: what a mutate records. Adds @name once. */
void vb_op_intent_touch (VbOpIntent *intent, const char *name);
/* Marks @name and every device it is built on started in @candidate;
 * touches those it changed. */
void vb_op_intent_start (VbOpIntent *intent, VbState *candidate, const char *name);
/* Re-adds @slot_component (a slot's own) to started @device. */
void vb_op_intent_readd (VbOpIntent *intent, const char *device,
                         const VbComponentConfig *slot_component);
void vb_op_intent_fault (VbOpIntent *intent, const char *device, guint index,
                         const char *gone_node);
/* Swaps started @device to its new configuration within @timeout_ms. */
void vb_op_intent_reconfigure (VbOpIntent *intent, const char *device, guint timeout_ms);

typedef gboolean (*VbMutateFunc) (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                                  VbOpIntent *intent, GError **error);
/* The memory of a large reply (GetManagedObjects of thousands of
 * objects, some 100 MiB made and freed) back to the system a moment
 * after the last such read, if no op runs then. Main thread. */
void vb_daemon_give_back_memory_soon (VbDaemon *daemon);
/* @device: the device the op is about; it runs beside ops on other
 * connected parts of the dependency graph (and waits for those before it
 * on its own part). NULL: the whole daemon; it runs alone (start-up,
 * shutdown, observe, scan, the policy's assembly). @what names the
 * request ("create", "start", ...: the test hook "WHAT:after-persist"
 * stops there), or NULL. */
void vb_daemon_submit (VbDaemon *daemon, const char *device, VbMutateFunc mutate, VbOpMode mode,
                       const char *what, VbOpDone done, gpointer user_data, GDestroyNotify destroy);

/* Whether an op of @mode about @device (NULL: the whole daemon) waits in
 * the queue, not started yet. */
gboolean vb_daemon_queued (VbDaemon *daemon, VbOpMode mode, const char *device);

/* Leaves the main loop once the running ops (if any) are done. */
void vb_daemon_quit (VbDaemon *daemon);

/* vb-reconciler-steps.c: sets the behind flag of @d's slots from the
 * running engine (metadata=none only); *@rebuilding (may be NULL) gets
 * whether some slot is being rebuilt. TRUE when a flag changed. Cheap:
 * no I/O. */
gboolean vb_device_sync_behind (VbDeviceConfig *d, const VbBackend *backend,
                                const char *block_device, gboolean *rebuilding);

G_END_DECLS
