/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An op: one change on its way through the reconciler, typed — what its
 * mutate asked for (VbOpIntent) and what its worker produced (events, the
 * observed state, status). Shared by vb-reconciler.c (the queue, one
 * function per mode), vb-reconciler-steps.c (the worker steps beyond the
 * plan) and vb-reconfig-run.c. Worker thread only, until op_finished. */
#pragma once

#include "vb-reconcile.h"

G_BEGIN_DECLS

/* Something an op's worker saw happen, published by the main thread. */
typedef struct {
  char *kind;        /* "device-appeared", "reconfigured", ... */
  char *device;      /* its name */
  GVariant *details; /* a{sv}, or NULL */
} VbOpEvent;

struct _VbOp {
  VbDaemon *daemon;
  VbState *previous;  /* desired when the op began */
  VbState *candidate; /* becomes the desired state */
  char *device;       /* what it is about (vb_daemon_submit), or NULL: the whole daemon */
  /* "device:NAME" and "source:PATH" of the part of the graph it may
   * change (vb-op-part.c); NULL: the whole daemon, alone */
  GHashTable *part;
  VbMutateFunc mutate;
  VbOpIntent intent; /* touched: checked, rolled back on failure */
  VbOpMode mode;
  gboolean applied;
  gboolean export_rolled_back; /* passed the checks and was saved */
  char *what;                  /* the request's name, or NULL */
  GHashTable *running;         /* uuid -> VbRunning*, a copy the worker updates */
  /* uuid -> backend name: nodes that outlived the vblkd that served them,
   * which starting their device takes over (found by the scan) */
  GHashTable *left_behind;
  GHashTable *status; /* name -> VbDeviceStatus*, computed by the worker */
  GPtrArray *events;  /* VbOpEvent* */
  /* a reconfiguration whose rebuild runs: the device, its configuration before */
  char *reconfigured;
  char *reconfigured_from;
  GError *error;
  VbOpDone done;
  gpointer user_data;
  GDestroyNotify destroy;
};

/* vb-op.c */
VbOp *vb_op_new (VbDaemon *daemon, const char *device, VbMutateFunc mutate, VbOpMode mode,
                 const char *what, VbOpDone done, gpointer user_data, GDestroyNotify destroy);
/* Back to as submitted (before its mutate ran), to wait. */
void vb_op_reset (VbOp *op);
void vb_op_free (VbOp *op);
/* uuid -> VbRunning*, deep */
GHashTable *vb_op_running_copy (GHashTable *running);
/* device name -> block node of every started device */
GHashTable *vb_op_block_devices_of (const VbState *state, GHashTable *running);
/* each slot's component UUID, in slot order, NULL-terminated (borrowed strings) */
GPtrArray *vb_op_slot_uuids (const VbDeviceConfig *config);

/* @details: a{sv} (floating is taken), or NULL */
void vb_op_add_event (VbOp *op, const char *kind, const char *name, GVariant *details);
/* The world (daemon->world_*): what is saved and served, shared by the
 * workers of ops that run side by side. vb_op_world_take merges the op's
 * part of its candidate and running into it; call it under the lock
 * (recursive). */
void vb_op_world_lock (VbOp *op);
void vb_op_world_unlock (VbOp *op);
void vb_op_world_take (VbOp *op);
/* The one write of state.json: the world with the op's candidate taken in. */
gboolean vb_op_save (VbOp *op, GError **error);
/* The DEV_DIR/NAME links of the world with the op's outcome taken in. */
void vb_op_sync_links (VbOp *op);

/* vb-op-part.c */
/* The connected parts of @names in @before and @after (may be NULL). */
GHashTable *vb_op_part_new (const VbState *before, const VbState *after, const char *const *names);
/* Which devices are built on which in @state (for vb_op_part_in): one
 * pass over it, for every part the dispatcher computes in one go. */
GHashTable *vb_op_part_index (const VbState *state);
/* The connected part of @name in @state, whose index @above is. */
GHashTable *vb_op_part_in (const VbState *state, GHashTable *above, const char *name);
/* After its mutate: the part of what the op names, touched and intends.
 * @above: the index of op->previous (vb_op_part_index of the state it
 * shares), or NULL to build it. */
GHashTable *vb_op_part_of (VbOp *op, GHashTable *above);
/* NULL meets everything. */
gboolean vb_op_parts_meet (GHashTable *a, GHashTable *b);
/* The devices of @state whose connected part (vb_op_part_new) meets the
 * part of one of @ops (VbOp*): all of them when one of those is a
 * whole-daemon op. One pass over @state (a part made for each device was
 * O(N²)). */
GHashTable *vb_op_parts_busy (const VbState *state, GPtrArray *ops);
/* Whether device @name is in @op's part (always, for a whole-daemon op). */
gboolean vb_op_in_part (const VbOp *op, const char *name);
/* The names of the devices of @op's part (op->part not NULL), a set
 * borrowing from it. */
GHashTable *vb_op_part_devices (const VbOp *op);
/* The positions in @state of @op's part's devices, in order (all of
 * them for a whole-daemon op): a loop over the part touches only it, not
 * the thousands beside. */
GArray *vb_op_part_positions (const VbOp *op, const VbState *state);
/* @op's part of @from into @into (op->part not NULL). */
void vb_op_part_merge_state (const VbOp *op, VbState *into, const VbState *from);
void vb_op_part_merge_running (const VbOp *op, GHashTable *into, GHashTable *from);
/* Likewise where a failure is only logged: @after says what was recorded. */
void vb_op_save_or_warn (VbOp *op, const char *after);

/* vb-op-plan.c: the plan's steps; a touched device whose step failed is
 * rolled back (and saved) */
void vb_op_execute_plan (VbOp *op);
gboolean vb_op_step_update (VbOp *op, const VbStep *step, GError **error);
/* the exports follow the desired state; one that fails is rolled back */
void vb_op_sync_exports (VbOp *op);

/* vb-op-observe.c */
/* size, completeness and slot states of every device, for D-Bus */
void vb_op_compute_status (VbOp *op);
/* the running nodes found again by every backend's scan */
void vb_op_scan_running (VbOp *op, GHashTable *before_scan);
/* An observe op on a part: each of its running devices' nodes looked at
 * alone (vb_op_scan_running is for ops that run alone). */
void vb_op_observe_part (VbOp *op);
/* devices that ran before the scan and do not now */
void vb_op_note_vanished (VbOp *op, GHashTable *before_scan);
/* at exit: the nodes vblkd serves itself are taken down */
void vb_op_stop_self_served (VbOp *op);
/* Then: the devices in use whose writes wait for this vblkd. */
char **vb_op_lingering (VbOp *op);
/* Every running device settled (SIGUSR2), RUN_DIR/settled written. */
void vb_op_settle (VbOp *op);

/* vb-reconciler-steps.c: the worker steps beyond the plan */
void vb_op_format_new (VbOp *op);
void vb_op_run_readds (VbOp *op);
void vb_op_run_faults (VbOp *op);
void vb_op_sync_spares (VbOp *op);
/* Refuses a change that drops a spare of @old the engine has just put in a
 * slot (its takeover not recorded yet): BUSY. */
gboolean vb_op_check_spares_kept (VbOp *op, const VbDeviceConfig *d, const VbDeviceConfig *old,
                                  GError **error);

/* vb-reconfig-run.c */
void vb_op_reconfigure (VbOp *op);
/* At start-up, before anything starts: a reconfiguration that a killed
 * vblkd left half done becomes the old or the new configuration of the
 * op's candidate (saved), as the components' metadata says. Returns the
 * device's name when there was one (NULL: no intent). */
char *vb_reconfig_resolve_intent (VbOp *op);
/* A running device being reconfigured keeps an in-sync copy of its data
 * in the new configuration; FALSE (WouldLoseData) when not. Checked before
 * the new configuration is probed: with every other leg gone it cannot be,
 * and "none of its components is there" would hide the reason (torture
 * seed 805534796). TRUE for anything else. */
gboolean vb_reconfig_keeps_a_copy (VbOp *op, GError **error);

G_END_DECLS
