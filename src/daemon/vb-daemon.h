/* vblkd's state and the one path every change takes:
 * authorize -> validate -> persist -> reconcile -> publish. */
#pragma once

#include <gio/gio.h>
#include <polkit/polkit.h>

#include "backend.h"
#include "vb-dbus-generated.h"
#include "vb-error.h"
#include "vb-graph.h"
#include "vb-plan.h"
#include "vb-state.h"
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
typedef struct _VbJobs VbJobs;     /* vb-jobs.h */
typedef struct _VbPolicy VbPolicy; /* vb-policy.h */

struct _VbDaemon {
  char *state_dir;
  char *state_path;
  char *run_dir;
  char *dev_dir;
  char *instance;         /* tags the block nodes of this state dir */
  int lock_fd;            /* flock of the state dir */
  gboolean fresh_run_dir; /* first vblkd since boot: autostart applies */

  VbState *desired;
  GHashTable *running; /* uuid -> VbRunning* (observed) */
  GHashTable *status;  /* name -> VbDeviceStatus* */

  GDBusConnection *connection;
  guint owner_id;         /* g_bus_own_name's */
  guint reconnect_source; /* the bus went away: tries it again */
  GDBusObjectManagerServer *object_manager;
  VbDBusManager *manager;
  GHashTable *device_objects; /* name -> VbDBusObjectSkeleton* */
  VbJobs *jobs;               /* the Job objects (vb-jobs.c) */
  PolkitAuthority *authority;
  VbPolicy *policy; /* the rules in force (vb-policy-dbus.c), never NULL once loaded */
  char *policy_dir; /* where they are read from */

  GHashTable *exports;      /* uuid -> NBD export runtime; the worker's (vb-exports.c) */
  GQueue ops;               /* VbOp*, one runs at a time */
  GPtrArray *readds;        /* "NAME\nSLOT": re-adds a mutate asked for, done by its op's worker */
  GPtrArray *faults;        /* "NAME\nINDEX": SetFaulty, likewise */
  char *reconfigure;        /* "NAME\nTIMEOUT_MS": the Reconfigure a mutate asked for */
  GHashTable *reconfigured; /* name -> the configuration before a reconfiguration whose
                               rebuild still runs (for show) */
  gboolean op_running;
  gboolean quit_pending; /* SIGTERM arrived while an op ran */
  int exit_status;
  gboolean shutting_down;
  GMainLoop *loop;
};

/* vb-auth.c: the polkit check, first thing in every changing method. */
typedef void (*VbAuthorizedFunc) (VbDaemon *daemon, GDBusMethodInvocation *invocation,
                                  gpointer user_data);
void vb_auth_check (VbDaemon *daemon, GDBusMethodInvocation *invocation, const char *action_id,
                    const char *device_name, VbAuthorizedFunc authorized, gpointer user_data,
                    GDestroyNotify destroy);

/* vb-reconciler.c */
typedef struct _VbOp VbOp;
typedef void (*VbOpDone) (VbDaemon *daemon, const GError *error, gpointer user_data);

/* Changes the desired state: @mutate runs on the main thread when the op's
 * turn comes, on a copy of the desired state, does the pure checks and
 * adds the names of the devices it changes to @touched. Then, on a worker
 * thread: touched devices are probed and checked against their real
 * components (on any error nothing is saved or changed), the state is
 * saved, the plan executed, and a touched device whose step failed is
 * rolled back to its previous configuration (saved again). @done runs on
 * the main thread with the first such error, or NULL. A NULL @mutate
 * re-drives the current desired state. */
typedef enum {
  VB_OP_CHANGE,      /* a request: check, save, execute the plan */
  VB_OP_STARTUP,     /* find the running block nodes again, then as CHANGE */
  VB_OP_OBSERVE,     /* find them again and publish; no plan, no save */
  VB_OP_SHUTDOWN,    /* vblkd exits: stop exports and the nodes it serves itself */
  VB_OP_POLICY,      /* as CHANGE, for the policy engine: component paths found by their
                        superblocks (another device naming the same path is stale) */
  VB_OP_RECONFIGURE, /* as CHANGE, but the desired state is saved only once the device's
                        engine was swapped (vb-reconfig-run.c) */
} VbOpMode;
typedef gboolean (*VbMutateFunc) (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                                  GPtrArray *touched, GError **error);
void vb_daemon_submit (VbDaemon *daemon, VbMutateFunc mutate, VbOpMode mode,
                       const char *hook_after_persist, VbOpDone done, gpointer user_data,
                       GDestroyNotify destroy);

/* vb-objects.c: the D-Bus objects, rebuilt from desired + observed. */
void vb_objects_sync (VbDaemon *daemon);
void vb_objects_emit_event (VbDaemon *daemon, const char *kind, const char *device,
                            GVariant *details);
void vb_manager_export (VbDaemon *daemon);
void vb_device_connect_handlers (VbDaemon *daemon, VbDBusDevice *device);
void vb_component_connect_handlers (VbDaemon *daemon, VbDBusComponent *component);

/* vb-devlinks.c: the stable DEV_DIR/NAME links (worker thread). */
void vb_devlinks_sync (const char *dev_dir, const VbState *state, GHashTable *running);

/* vb-udev.c: block events for the nodes vblk runs trigger an observe op. */
void vb_udev_watch (VbDaemon *daemon);
/* After start-up: every block device there now goes through the policy. */
void vb_udev_coldplug (void);

/* vb-objects.c: a component of an engine device failed (any thread). */
void vb_daemon_component_failed (const char *uuid, guint component, int error, gpointer user_data);
/* vb-engine-jobs.c: an engine job started, progressed or ended (any thread). */
void vb_daemon_engine_job (const char *uuid, const VbEngineJob *job, gpointer user_data);
/* vb-engine-jobs.c: a redundant device without on-component metadata has
 * its legs' state (behind or in sync) saved in the desired state, after a
 * failure or a rebuild. */
void vb_daemon_record_behind (VbDaemon *daemon, const char *name);
/* Sets the behind flag of @d's slots from the running engine (metadata=none
 * only); *@rebuilding (may be NULL) gets whether some slot is being
 * rebuilt. TRUE when a flag changed. Cheap: no I/O. */
gboolean vb_device_sync_behind (VbDeviceConfig *d, const VbBackend *backend,
                                const char *block_device, gboolean *rebuilding);
/* Main thread: the Job object of engine job @id of @d, made now (for
 * Check, which returns its path before the job's first report). */
const char *vb_engine_jobs_register (VbDaemon *daemon, const VbDeviceConfig *d, guint64 id,
                                     const char *operation);

/* main.c: leave once the running op (if any) is done. */
void vb_daemon_quit (VbDaemon *daemon);

/* State names for D-Bus. */
const char *vb_daemon_device_state (VbDaemon *daemon, const VbDeviceConfig *config);

/* Helpers for method handlers. */
void vb_invocation_return_gerror (GDBusMethodInvocation *invocation, const GError *error);
gboolean vb_options_get_bool (GVariant *options, const char *key, gboolean fallback);

G_END_DECLS
