/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Observed block nodes and the plan: the steps that take what runs to
 * what is desired. Pure logic, no I/O. */
#pragma once

#include <glib.h>

#include "vb-state.h"

G_BEGIN_DECLS

/* What runs in the kernel for one device (observed state). */
typedef struct {
  char *block_device;     /* "/dev/loop3" */
  char *backend;          /* "loop" */
  GHashTable *attributes; /* the attributes the running node was made with */
  char *why;              /* why this backend, for people (NULL: not known) */
} VbRunning;

VbRunning *vb_running_new (const char *block_device, const char *backend, GHashTable *attributes);
VbRunning *vb_running_copy (const VbRunning *running);
void vb_running_free (VbRunning *running);

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
