/* The backend interface: how a started device becomes a block node. Each
 * backend is one file exposing one const VbBackend; backends.c lists them.
 * Every callback but available/supports blocks and runs on a worker
 * thread of the daemon, never on its main loop. */
#pragma once

#include <glib.h>

#include "engine/driver.h"

G_BEGIN_DECLS

/* What a backend needs to make a block node for one device. */
typedef struct {
  const char *name; /* device name, for messages */
  const char *instance; /* the vblkd instance (state dir) that owns the node */
  const char *uuid;     /* device UUID; with @instance, the node's ownership tag */
  const VbDriver *driver;
  GHashTable *attributes;
  guint n_components;
  const char *const *paths;          /* resolved path of each component */
  const VbComponentInfo *components; /* probed facts of each component */
} VbBackendRequest;

/* A block node found running for vblk (by scan). */
#define VB_INSTANCE_ID_LEN 8 /* hex digits */

typedef struct {
  char *uuid;
  char *block_device; /* "/dev/loop3" */
  char *backing;      /* what it serves from, for messages */
} VbBackendInstance;

void vb_backend_instance_free (VbBackendInstance *instance);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbBackendInstance, vb_backend_instance_free)

typedef struct {
  const char *name;
  /* Probed at run time; FALSE with a reason for people. */
  gboolean (*available) (char **reason);
  gboolean (*supports) (const VbDriver *driver, char **reason);
  /* Makes the block node and returns its path once it exists and udev (if
   * running) has processed it. */
  char *(*start) (const VbBackendRequest *request, GError **error);
  /* Removes the block node; refuses when it is no longer tagged @instance, @uuid. */
  gboolean (*stop) (const char *block_device, const char *instance, const char *uuid,
                    GError **error);
  /* Applies attributes marked online to a started node. */
  gboolean (*update) (const char *block_device, const VbBackendRequest *request, GError **error);
  /* Every block node this backend runs for @instance (VbBackendInstance*);
   * nodes of other vblkd instances on the host are left alone. */
  GPtrArray *(*scan) (const char *instance, GError **error);
} VbBackend;

const VbBackend *const *vb_backends (void);
const VbBackend *vb_backend_lookup (const char *name);
/* The backend for @driver: @requested itself (checked), or for "auto" the
 * first available one that supports the driver. */
const VbBackend *vb_backend_choose (const char *requested, const VbDriver *driver, GError **error);
/* "auto, loop" */
char *vb_backends_known_names (void);

G_END_DECLS
