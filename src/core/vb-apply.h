/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Apply's plan, the pure part: a spec (vb_spec_from_json) checked
 * as a whole, and the ordered steps that turn the desired state into it,
 * each the change one Device or Manager method makes. No D-Bus, no I/O:
 * the daemon checks the real components and runs the steps
 * (daemon/bus/vb-apply.c). */
#pragma once

#include <glib.h>

#include "vb-state.h"

G_BEGIN_DECLS

/* In the order the plan runs them (within a kind: dependents first for
 * stops and deletes, dependencies first for the rest). */
typedef enum {
  VB_APPLY_UNEXPORT,
  VB_APPLY_REMOVE, /* a spare, or a component a spare replaced */
  VB_APPLY_DELETE, /* before stops: a device kept stopped may lose a user it deletes */
  VB_APPLY_STOP,
  VB_APPLY_CREATE,
  VB_APPLY_RECONFIGURE,
  VB_APPLY_SET, /* attributes, backend, autostart */
  VB_APPLY_ADD, /* a spare */
  VB_APPLY_START,
  VB_APPLY_EXPORT,
} VbApplyKind;

typedef struct {
  VbApplyKind kind;
  char *device;
  char *path;   /* the spec's place ("devices[1]"), or NULL: a device it does not have */
  char *reason; /* for people */
  gboolean loses_data;
  VbDeviceConfig *config; /* CREATE: the new device, slots only (UUIDs may be NULL) */
  GHashTable *attributes; /* SET: the ones that change; RECONFIGURE: given */
  char *backend;          /* SET: the new one, or NULL */
  gint autostart;         /* SET: 0 or 1, or -1: unchanged */
  char *driver;           /* RECONFIGURE: the new one, or NULL: the same */
  char **add;             /* RECONFIGURE: new slots' sources (NULL: none) */
  char **remove;          /* RECONFIGURE: slots' sources dropped (NULL: none) */
  char *source;           /* ADD, REMOVE: the component */
  char *listen;           /* EXPORT, UNEXPORT: "unix:PATH" or "tcp:HOST:PORT" */
  char *export;           /* EXPORT, UNEXPORT (for its undo): as the desired state keeps it */
} VbApplyStep;

/* Steps that would lose data are refused unless allowed: DELETE by
 * @prune, the others (a window's size shrunk, its offset moved) by their
 * id in @confirm. */
typedef struct {
  gboolean prune;
  const char *const *confirm; /* vb_apply_step_id()s, NULL-terminated, or NULL */
} VbApplyOptions;

/* The plan from @current (the desired state) to @spec. @spec is checked
 * first, as a whole, errors VB_ERROR_INVALID_ARGUMENT (or NOT_FOUND,
 * DEPENDENCY_CYCLE, NOT_SUPPORTED) naming the JSON path: the driver and
 * attributes of every device (canonical, in range), components (each one
 * once, vblk:NAME a device of the spec, at most what the driver takes),
 * no cycle, a started device on started ones, UUIDs that agree with the
 * devices of that name, and the changes the running devices allow. Then
 * WOULD_LOSE_DATA naming the steps @options does not allow. An empty
 * array: nothing to do. */
GPtrArray *vb_apply_plan (const VbState *current, const VbState *spec,
                          const VbApplyOptions *options, GError **error);

/* "delete:r1", "set:w" — what VbApplyOptions.confirm names. */
char *vb_apply_step_id (const VbApplyStep *step);
const char *vb_apply_kind_name (VbApplyKind kind);
void vb_apply_step_free (VbApplyStep *step);

/* The plan as JSON: {"steps": [{"id", "action", "device", "reason",
 * "loses_data", and the step's arguments}, ...]}; @status (may be NULL)
 * gives each step's "status" ("done", "undone", "failed", ...). */
char *vb_apply_plan_to_json (GPtrArray *plan, const char *const *status);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbApplyStep, vb_apply_step_free)

G_END_DECLS
