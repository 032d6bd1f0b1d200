/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What running engine devices report — jobs started, progressed, ended —
 * as Job objects and Event signals (vb-engine-jobs.c). */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

/* An engine job started, progressed or ended (any thread). */
void vb_daemon_engine_job (const char *uuid, const VbEngineJob *job, gpointer user_data);
/* A redundant device without on-component metadata has its legs' state
 * (behind or in sync) saved in the desired state, after a failure or a
 * rebuild. */
void vb_daemon_record_behind (VbDaemon *daemon, const char *name);
/* Main thread: the Job object of engine job @id of @d, made now (for
 * Check, which returns its path before the job's first report). */
const char *vb_engine_jobs_register (VbDaemon *daemon, const VbDeviceConfig *d, guint64 id,
                                     const char *operation);

G_END_DECLS
