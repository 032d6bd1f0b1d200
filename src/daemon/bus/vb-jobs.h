/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Jobs: long operations (resync, rebuild, check, repair) published as
 * /org/vblk/VBlk1/jobs/N objects with progress, rate and cancel. The owner
 * of the work creates a job on the main thread, reports progress from any
 * thread, and finishes it exactly once. */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

typedef struct _VbJob VbJob;

/* Asks the job to stop; called on the main thread, at most once per job,
 * never after vb_job_finish() returned (it runs under the job's lock, so it
 * must only ask — set a flag, cancel a GCancellable — and not wait; it may
 * call vb_job_finish() itself). The owner then finishes the job with state
 * "cancelled". */
typedef void (*VbJobCancelFunc) (VbJob *job, gpointer user_data);

/* The jobs of a daemon (daemon->jobs), made and freed by main.c. Freeing
 * unexports every job; owners that still hold a job may go on calling
 * vb_job_update() and vb_job_finish() on it, which then publish nothing. */
VbJobs *vb_jobs_new (VbDaemon *daemon);
void vb_jobs_free (VbJobs *jobs);

/* Main thread. Exports /org/vblk/VBlk1/jobs/N (N from 1, never reused in a
 * run) through daemon->object_manager, State "running". @operation is
 * "resync", "rebuild", "check" or "repair"; @objects (NULL-terminated, at
 * least one) are object paths, the device's first, then for a rebuild the
 * component's. @cancel may be NULL (Cancel then fails with NotSupported).
 * Returns a reference owned by the caller (vb_job_unref once finished);
 * the daemon keeps its own while the job is exported. */
VbJob *vb_job_new (VbDaemon *daemon, const char *operation, const char *const *objects,
                   guint64 total_bytes, VbJobCancelFunc cancel, gpointer cancel_data);

/* Any thread. @done_bytes of Bytes are done, @mismatches found so far.
 * Cheap: at most about four updates a second reach D-Bus. Ignored once the
 * job is finished. */
void vb_job_update (VbJob *job, guint64 done_bytes, guint64 mismatches);

/* Any thread: the total became known or changed (a job created before its
 * size was known). Published with the next update. */
void vb_job_set_total (VbJob *job, guint64 total_bytes);

/* Any thread, exactly once. @state is "finished", "cancelled" or "failed";
 * @message (may be NULL) says why it failed, or sums up what it did. The
 * final properties reach D-Bus at once (directly when called on the main
 * thread). After it returns, the cancel function is never called. A job
 * that finished keeps BytesDone equal to Bytes. */
void vb_job_finish (VbJob *job, const char *state, const char *message);

/* Main thread. The job was made for @invocation's caller: StartedByUID
 * (asked of the bus), who may cancel it without polkit. */
void vb_job_set_started_by (VbJob *job, GDBusMethodInvocation *invocation);

VbJob *vb_job_ref (VbJob *job);
void vb_job_unref (VbJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbJob, vb_job_unref)

/* "/org/vblk/VBlk1/jobs/N"; valid as long as the job. */
const char *vb_job_object_path (VbJob *job);
/* The device's object path (objects[0]). */
const char *vb_job_device_path (VbJob *job);
const char *vb_job_operation (VbJob *job);
/* Any thread: vb_job_finish() was not called yet. */
gboolean vb_job_is_running (VbJob *job);

/* Main thread. The running job of the device at @device_object_path (the
 * oldest when several), or NULL; borrowed. For refusing a second job on a
 * device, or for asking one to stop before a Stop or Delete. */
VbJob *vb_jobs_find_running (VbDaemon *daemon, const char *device_object_path);
/* Main thread. Asks every running job of that device to stop (no polkit
 * check: for the daemon's own use); returns how many were asked. */
guint vb_jobs_cancel_device (VbDaemon *daemon, const char *device_object_path);
/* Main thread. Unexports the jobs of that device that ended (when the
 * device is deleted); running ones stay. */
void vb_jobs_forget_device (VbDaemon *daemon, const char *device_object_path);

G_END_DECLS
