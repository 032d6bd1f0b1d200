/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Observed block nodes and the plan: the steps that take what runs to
 * what is desired. Pure logic, no I/O. */
#pragma once

#include <glib.h>

#include "vb-state.h"

G_BEGIN_DECLS

/* What runs in the kernel for one device (observed state). Set up once,
 * before it goes into a table, then never changed: a table's copy shares
 * its entries (an op copies what runs; with 1,000 devices started, deep
 * copies were a tenth of every op). A new state is a new entry. */
typedef struct {
  char *block_device;     /* "/dev/loop3" */
  char *backend;          /* "loop" */
  GHashTable *attributes; /* the attributes the running node was made with */
  char *why;              /* why this backend, for people (NULL: not known) */
  char *device;           /* the name of the device it was started or found for
                           * (NULL: none, or not known); a hint: the state
                           * decides (vb_running_device) */
  gint refs;              /* private */
} VbRunning;

VbRunning *vb_running_new (const char *block_device, const char *backend, GHashTable *attributes);
/* Another reference to @running (which is not to be changed after). */
VbRunning *vb_running_copy (const VbRunning *running);
/* Drops a reference. */
void vb_running_free (VbRunning *running);
/* The device of @state running as @uuid (@running's key), found in O(1)
 * by the name @running records, or NULL when that name is not in @state
 * with that UUID — the caller then looks through the state (a device
 * deleted and still running, a node no device owns). */
const VbDeviceConfig *vb_running_device (const VbState *state, const char *uuid,
                                         const VbRunning *running);
typedef void (*VbRunningDeviceFunc) (const VbDeviceConfig *device, const VbRunning *running,
                                     gpointer data);
/* Calls @func for each device of @state that runs (@running: UUID ->
 * VbRunning*), in no set order: through vb_running_device, one lookup per
 * node, or, when one node's device is not found so, by a walk of the
 * state (thousands configured, a few started: no walk at each op). */
void vb_running_foreach_device (const VbState *state, GHashTable *running, VbRunningDeviceFunc func,
                                gpointer data);

/* The plan: pure. Steps in the order they must run. */
typedef enum {
  VB_STEP_STOP,
  VB_STEP_UPDATE,
  VB_STEP_START,
} VbStepKind;

typedef struct {
  VbStepKind kind;
  char *name; /* device name; NULL for a node no desired device owns */
  char *uuid;
  char *block_device; /* STOP, UPDATE */
  char *backend;      /* STOP, UPDATE: what runs it; START: requested */
} VbStep;

void vb_step_free (VbStep *step);
/* @previous may be NULL; it orders the stops of devices that @desired no
 * longer has. @running: uuid -> VbRunning*. */
GPtrArray *vb_plan_compute (const VbState *previous, const VbState *desired, GHashTable *running);
char *vb_plan_to_json (GPtrArray *plan);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbRunning, vb_running_free)

G_END_DECLS
