/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Apply's parts (vb-manager-apply.c runs the plan,
 * vb-manager-apply-steps.c turns a step, or its undo, into the request
 * and mutate of the method a person would have called). */
#pragma once

#include "vb-apply.h"
#include "vb-bus.h"
#include "vb-jobs.h"
#include "vb-request.h"

G_BEGIN_DECLS

typedef struct {
  VbDaemon *daemon;
  GDBusMethodInvocation *invocation;
  GVariant *options;
  char *spec_json;
  GPtrArray *plan;     /* VbApplyStep* */
  const char **status; /* per step (static strings) */
  VbState **before;    /* per step done: the desired state before it ran ... */
  VbState **after;     /* ... and after */
  GPtrArray *actions;  /* polkit actions still to ask for */
  guint next;          /* the step to run next */
  gint undoing;        /* the step being undone */
  GError *error;       /* why the apply stopped: a step's failure, or a cancel */
  GString *not_undone; /* why undos failed */
  VbJob *job;
  gboolean cancelled;
  VbState *spec; /* as parsed: the JSON paths of its components */
} Apply;

static inline VbApplyStep *
vb_apply_step_at (Apply *a, guint i)
{
  return a->plan->pdata[i];
}

/* What a mutate gets: the request (first, so that the methods' mutates
 * take it as theirs), and the step it is for. */
typedef struct {
  VbRequest req;
  Apply *apply;
  guint index;
} StepRequest;

typedef struct {
  VbMutateFunc mutate;
  VbOpMode mode;
} StepRun;

/* The request and mutate (*@run) of step @i. */
StepRequest *vb_apply_step_request (Apply *a, guint i, StepRun *run);
void vb_apply_step_request_free (StepRequest *sr);
/* The request of step @i's undo (a done step's: a->before[i] and
 * a->after[i] set), for vb_apply_mutate_undo in *@mode. */
StepRequest *vb_apply_undo_request (Apply *a, guint i, VbOpMode *mode);
gboolean vb_apply_mutate_undo (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                               VbOpIntent *intent, GError **error);

G_END_DECLS
