/* The reconciler's insides shared by vb-reconciler.c (the op queue, the
 * plan) and vb-reconciler-steps.c (the worker steps beyond the plan:
 * superblocks at creation, re-adds, faults, spares). Worker thread only. */
#pragma once

#include "vb-daemon.h"

G_BEGIN_DECLS

struct _VbOp {
  VbDaemon *daemon;
  VbState *previous;  /* desired when the op began */
  VbState *candidate; /* becomes the desired state */
  VbMutateFunc mutate;
  GPtrArray *touched; /* names the request changes: checked, rolled back on failure */
  VbOpMode mode;
  gboolean applied;
  gboolean export_rolled_back; /* passed the checks and was saved */
  char *hook_after_persist;
  GHashTable *running; /* uuid -> VbRunning*, a copy the worker updates */
  /* uuid -> backend name: nodes that outlived the vblkd that served them,
   * which starting their device takes over (found by the scan) */
  GHashTable *left_behind;
  GHashTable *status;      /* name -> VbDeviceStatus*, computed by the worker */
  GPtrArray *events;       /* "kind\nname[\ndetails as GVariant text]" */
  char *reconfigured_from; /* "NAME\nOLD CONFIGURATION": a reconfiguration's rebuild runs */
  GError *error;
  VbOpDone done;
  gpointer user_data;
  GDestroyNotify destroy;
};

/* device name -> block node of every started device */
GHashTable *vb_op_block_devices_of (const VbState *state, GHashTable *running);
/* each slot's component UUID, in slot order, NULL-terminated (borrowed strings) */
GPtrArray *vb_op_slot_uuids (const VbDeviceConfig *config);

void vb_op_add_event (VbOp *op, const char *kind, const char *name, GVariant *details);

void vb_op_format_new (VbOp *op);
/* vb-reconfig-run.c */
void vb_op_reconfigure (VbOp *op);
/* At start-up, before anything starts: a reconfiguration that a killed
 * vblkd left half done becomes the old or the new configuration of
 * @state (saved), as the components' metadata says. Returns the device's
 * name when there was one (NULL: no intent). */
char *vb_reconfig_resolve_intent (VbDaemon *daemon, VbState *state);
void vb_op_run_readds (VbOp *op);
void vb_op_run_faults (VbOp *op);
void vb_op_sync_spares (VbOp *op);
/* Refuses a change that drops a spare of @old the engine has just put in a
 * slot (its takeover not recorded yet): BUSY. */
gboolean vb_op_check_spares_kept (VbOp *op, const VbDeviceConfig *d, const VbDeviceConfig *old,
                                  GError **error);

G_END_DECLS
