/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The backend interface: how a started device becomes a block node. Each
 * backend is one file exposing one const VbBackend; backends.c lists them.
 * Every callback but available/supports blocks and runs on a worker
 * thread of the daemon, never on its main loop. */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "block-ops.h"
#include "driver.h"
#include "engine.h"

G_BEGIN_DECLS

/* What a backend needs to make a block node for one device. */
typedef struct {
  const char *name;     /* device name, for messages */
  const char *instance; /* the vblkd instance (state dir) that owns the node */
  const char *uuid;     /* device UUID; with @instance, the node's ownership tag */
  const VbDriver *driver;
  GHashTable *attributes;
  guint n_components;
  const char *const *paths;           /* resolved path of each component */
  const VbComponentInfo *components;  /* probed facts of each component */
  const char *const *component_uuids; /* each slot's component UUID */
  guint n_spares;                     /* spares a failed slot is rebuilt onto */
  const char *const *spare_paths;
  const char *const *spare_uuids;
  /* metadata=none: the slots the desired state has behind (NULL: none),
   * and those of them that failed and stay faulty until re-added */
  const gboolean *out_of_sync;
  const gboolean *failed;
  /* format: the role table of a reconfigured stopped device */
  gboolean reconfigure;
} VbBackendRequest;

/* What a reconfiguration did. */
typedef struct {
  gint64 held_us;   /* how long requests were held */
  guint64 old_size; /* bytes */
  guint64 new_size;
  gboolean size_changed; /* announced to the kernel */
} VbReconfigureReport;

/* A block node found running for vblk (by scan). */
#define VB_INSTANCE_ID_LEN 8 /* hex digits */

typedef struct {
  char *uuid;
  char *block_device; /* "/dev/loop3" */
  char *backing;      /* what it serves from, for messages */
  /* the node outlived the vblkd that served it and waits for a new one:
   * starting the device takes it over */
  gboolean left_behind;
} VbBackendInstance;

void vb_backend_instance_free (VbBackendInstance *instance);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbBackendInstance, vb_backend_instance_free)

/* Who made a block node: any vblkd instance on the host, through some
 * backend (the claim refuses such nodes as components, and the policy
 * never takes them for blank disks). */
typedef struct {
  const char *backend; /* the backend's name */
  char *instance;      /* the owner's instance id */
  char *uuid;          /* its device's UUID; md names carry only the first 16 hex
                          digits (compare with vb_node_owner_is) */
  gboolean internal;   /* not a device's node: one vblk uses under another
                          (a loop device under a dm table or an md array) */
} VbNodeOwner;

void vb_node_owner_clear (VbNodeOwner *owner);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VbNodeOwner, vb_node_owner_clear)
/* Whether @owner names device @uuid of @instance. */
gboolean vb_node_owner_is (const VbNodeOwner *owner, const char *instance, const char *uuid);

/* What a started device offers while it runs with components of its own
 * (an engine device of this process, an md array of the kernel): all
 * cheap and non-blocking unless said. A call that can fail returns FALSE
 * with a G_IO_ERROR converted from errno (BUSY: it holds the last copy of
 * some data, or another job runs; NOT_SUPPORTED: no redundancy or no such
 * device; INVALID_ARGUMENT: not one of its slots; NOT_FOUND: no such job). */
typedef struct {
  /* A component's health; FALSE when the device or slot is unknown. */
  gboolean (*component_status) (const char *block_device, guint component, gboolean *faulty,
                                gboolean *rebuilding, guint64 *errors);
  /* The path of the component in slot @component now (a spare that took
   * it, say); NULL when unknown. */
  char *(*slot_source) (const char *block_device, guint component);
  /* The component was not there when the device started (degraded start). */
  gboolean (*component_missing) (const char *block_device, guint component);
  /* TRUE when some data has no healthy copy left: the device refuses writes. */
  gboolean (*lost_data) (const char *block_device);
  /* SetFaulty. */
  gboolean (*set_faulty) (const char *block_device, guint component, GError **error);
  /* A faulty component's file is let go (it is being removed); blocks. */
  void (*release) (const char *block_device, guint component);
  /* In-process access to the device, for an export or an engine device
   * stacked on it; FALSE for a device this process does not serve. */
  gboolean (*block_ops) (const char *block_device, const VbBlockOps **ops, void **handle);
  /* Check (compare copies; @repair rewrites mismatches) as job @job. */
  gboolean (*check) (const char *block_device, gboolean repair, guint64 *job, GError **error);
  /* Asks job @job to stop; the job ends as cancelled. */
  gboolean (*cancel_job) (const char *block_device, guint64 job, GError **error);
  /* Puts @path back into faulty slot @slot (re-add), or a blank
   * replacement that takes component UUID @uuid (may be NULL); blocks. */
  gboolean (*readd) (const char *block_device, guint slot, const char *path, const char *uuid,
                     GError **error);
  /* The spares a failed slot is rebuilt onto, replacing the list. */
  void (*set_spares) (const char *block_device, guint n, const char *const *paths,
                      const char *const *uuids);
  /* A stop must not leave the node while it is in use: md holds a write
   * to a clean array with vblk's metadata until vblkd marks the
   * superblocks dirty, and an engine device's I/O is vblkd itself, so a
   * vblkd gone would leave their writes hanging. */
  gboolean (*needs_server) (const char *block_device);
  /* The device goes on serving, left as a clean stop would leave it (the
   * shutdown's last step, its file system read-only): the engine's bitmap
   * cleared, md's superblocks clean. Blocks a few seconds at most; FALSE
   * and @error say what is left to resync. */
  gboolean (*settle) (const char *block_device, GError **error);
} VbEngineDeviceOps;

/* What a backend declares it can do; the daemon asks these, never which
 * callbacks are set or what the backend is called. */
typedef enum {
  /* format: on-component metadata for a new (or reconfigured stopped) device */
  VB_BACKEND_CAN_FORMAT = 1 << 0,
  /* reconfigure: online reconfiguration of a started device */
  VB_BACKEND_CAN_RECONFIGURE = 1 << 1,
  /* this process serves the device's I/O through the engine (engine ops
   * with block_ops); the node is gone or idle without it */
  VB_BACKEND_SERVES_ENGINE = 1 << 2,
  /* the block node outlives the vblkd that made it: the kernel runs it, or
   * holds its requests until a new vblkd takes it over (scan finds it) */
  VB_BACKEND_SURVIVES_SERVER = 1 << 3,
} VbBackendCapabilities;

/* One backend: one file (or folder) and one const struct. Required:
 * name, available, supports, start, stop, update, scan, node_owner; the
 * others as the capabilities declare (vb_backend_check). */
typedef struct {
  const char *name;
  VbBackendCapabilities capabilities;
  /* Probed at run time; FALSE with a reason for people. */
  gboolean (*available) (char **reason);
  /* @attributes (may be NULL): the device's, e.g. engine=true asks for the engine */
  gboolean (*supports) (const VbDriver *driver, GHashTable *attributes, char **reason);
  /* Makes the block node and returns its path once it exists and udev (if
   * running) has processed it. */
  char *(*start) (const VbBackendRequest *request, GError **error);
  /* Removes the block node; refuses when it is no longer tagged @instance, @uuid. */
  gboolean (*stop) (const char *block_device, const char *instance, const char *uuid,
                    GError **error);
  /* Applies attributes marked online to a started node (and, on a node the
   * kernel runs, loads its configuration again). */
  gboolean (*update) (const char *block_device, const VbBackendRequest *request, GError **error);
  /* Every block node this backend runs for @instance (VbBackendInstance*);
   * nodes of other vblkd instances on the host are left alone. */
  GPtrArray *(*scan) (const char *instance, GError **error);
  /* Whether block node @devnum is one this backend made for a vblkd of
   * any instance, and whose (sets @owner's instance, uuid, internal).
   * Cheap: sysfs and at most one control ioctl; never blocks on I/O. */
  gboolean (*node_owner) (dev_t devnum, VbNodeOwner *owner);
  /* VB_BACKEND_CAN_FORMAT: writes on-component metadata for a device just
   * created (or a stopped device's reconfigured role table). */
  gboolean (*format) (const VbBackendRequest *request, GError **error);
  /* VB_BACKEND_CAN_RECONFIGURE: online reconfiguration of a started
   * device: new requests are held, those in flight drain (at most
   * @timeout_ms), the device goes on with the configuration of @request
   * (its role table remapped by component UUID), and the held requests go
   * on against it; a new size is announced to the kernel. On any failure
   * the device goes on as it was. Blocks. */
  gboolean (*reconfigure) (const char *block_device, const VbBackendRequest *request,
                           guint timeout_ms, VbReconfigureReport *report, GError **error);
  /* What its running devices offer (required with SERVES_ENGINE); NULL
   * for a backend whose devices have no components to watch. */
  const VbEngineDeviceOps *engine;
} VbBackend;

/* Called on an I/O thread when a component of an engine device fails;
 * must not block. */
typedef void (*VbBackendFailureFunc) (const char *uuid, guint component, int error,
                                      gpointer user_data);

/* Called on a job's thread as an engine job starts, progresses and ends;
 * must not block. */
typedef void (*VbBackendJobFunc) (const char *uuid, const VbEngineJob *job, gpointer user_data);

/* Once, before any other call: where engine devices keep their FUSE
 * mounts (RUN_DIR/engine), and who hears of component failures and jobs;
 * registers the built-in backends (FALSE: one of them is refused). */
gboolean vb_backends_init (const char *run_dir, VbBackendFailureFunc on_failure,
                           VbBackendJobFunc on_job, gpointer user_data, GError **error);
/* Whether @backend is complete: its required callbacks, and those its
 * capabilities need, are there. */
gboolean vb_backend_check (const VbBackend *backend, GError **error);
/* Adds @backend (checked) after those registered; refuses an incomplete
 * one, or a name already taken. */
gboolean vb_backends_register (const VbBackend *backend, GError **error);
/* FALSE with a G_IO_ERROR for negative errno @res (the conversion at a
 * backend's boundary); TRUE for @res >= 0. */
gboolean vb_backend_errno (int res, GError **error);
void vb_backends_report_job (const char *uuid, const VbEngineJob *job);
const char *vb_backends_run_dir (void);
void vb_backends_report_failure (const char *uuid, guint component, int error);

const VbBackend *const *vb_backends (void);
const VbBackend *vb_backend_lookup (const char *name);
/* The backend for @driver: @requested itself (checked), or for "auto" the
 * first available one that supports the driver; @why (may be NULL) says
 * why, for people. */
const VbBackend *vb_backend_choose (const char *requested, const VbDriver *driver,
                                    GHashTable *attributes, char **why, GError **error);
/* "auto, loop" */
char *vb_backends_known_names (void);
/* Reads "vblk:INSTANCE:UUID[:SUFFIX]" (loop names, nbd identifiers); the
 * suffix "dm" marks a node vblk uses under another. */
gboolean vb_node_owner_parse_tag (const char *tag, VbNodeOwner *owner);
/* Asks every backend whether it made block node @devnum (VbBackend's
 * node_owner); a partition counts as its whole disk's. */
gboolean vb_backends_node_owner (dev_t devnum, VbNodeOwner *owner);

G_END_DECLS
