/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A D-Bus request on its way through authorize -> submit -> done. */
#pragma once

#include "vb-options.h"

#include "vb-bus.h"
#include "vb-jobs.h"

G_BEGIN_DECLS

typedef struct {
  GDBusMethodInvocation *invocation;
  char *name;        /* device the request is about */
  GVariant *options; /* a{sv} */
  GHashTable *attributes;
  char *driver;
  char **components;
  char *source;
  guint index;       /* SetFaulty: the component's index in its device */
  char *result_path; /* object path returned on success, or NULL */
  VbJob *job;        /* the request's job while it runs, or NULL */
} VbRequest;

VbRequest *vb_request_new (GDBusMethodInvocation *invocation, const char *name, GVariant *options);
void vb_request_free (VbRequest *req);
/* Frees what @req holds, not @req (one inside another struct). */
void vb_request_clear (VbRequest *req);

/* The request runs as a Job of @operation on its device (ended by
 * vb_request_done), started by the caller. */
void vb_request_start_job (VbRequest *req, VbDaemon *daemon, const char *operation);

/* Completes the invocation: the error, or () / (o result_path); ends the
 * request's job. */
void vb_request_done (VbDaemon *daemon, const GError *error, gpointer user_data);

void vb_invocation_return_gerror (GDBusMethodInvocation *invocation, const GError *error);

G_END_DECLS
