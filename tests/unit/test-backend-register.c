/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Registering a backend: a struct missing a required callback, or one its
 * declared capabilities need, is refused with an error naming what is
 * missing; a complete one passes, once; the built-in backends pass. */
#include "config.h"

#include "backend.h"
#include "kernel-parts.h"
#include "vb-error.h"

#include <string.h>

static gboolean
no_reason (char **reason)
{
  return TRUE;
}

static gboolean
any_driver (const VbDriver *driver, GHashTable *attributes, char **reason)
{
  return TRUE;
}

static char *
start (const VbBackendRequest *request, GError **error)
{
  return g_strdup ("/dev/null");
}

static gboolean
stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  return TRUE;
}

static gboolean
update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  return TRUE;
}

static GPtrArray *
scan (const char *instance, GError **error)
{
  return g_ptr_array_new ();
}

static gboolean
node_owner (dev_t devnum, VbNodeOwner *owner)
{
  return FALSE;
}

static gboolean
format (const VbBackendRequest *request, GError **error)
{
  return TRUE;
}

/* A newcomer's backend: the core callbacks, no capability. */
static const VbBackend complete = {
  .name = "test-complete",
  .available = no_reason,
  .supports = any_driver,
  .start = start,
  .stop = stop,
  .update = update,
  .scan = scan,
  .node_owner = node_owner,
};

static void
assert_refused (const VbBackend *backend, const char *names)
{
  g_autoptr (GError) error = NULL;

  g_assert_false (vb_backends_register (backend, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, names));
  g_assert_null (vb_backend_lookup (backend->name));
}

static void
test_missing_required (void)
{
  VbBackend no_stop = complete;

  no_stop.name = "test-no-stop";
  no_stop.stop = NULL;
  assert_refused (&no_stop, "no stop");
}

static void
test_capability_without_callback (void)
{
  VbBackend no_format = complete, no_engine = complete;

  no_format.name = "test-no-format";
  no_format.capabilities = VB_BACKEND_CAN_FORMAT;
  assert_refused (&no_format, "VB_BACKEND_CAN_FORMAT");
  no_engine.name = "test-no-engine";
  no_engine.capabilities = VB_BACKEND_SERVES_ENGINE;
  assert_refused (&no_engine, "VB_BACKEND_SERVES_ENGINE");
}

static void
test_incomplete_engine_ops (void)
{
  static const VbEngineDeviceOps half = { 0 };
  VbBackend backend = complete;

  backend.name = "test-half-engine";
  backend.engine = &half;
  assert_refused (&backend, "component_status");
}

static void
test_complete_passes (void)
{
  g_autoptr (GError) error = NULL;
  VbBackend with_format = complete;

  g_assert_true (vb_backends_register (&complete, &error));
  g_assert_no_error (error);
  g_assert_true (vb_backend_lookup ("test-complete") == &complete);
  /* a name is taken once */
  g_assert_false (vb_backends_register (&complete, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_ALREADY_EXISTS);
  g_clear_error (&error);
  with_format.name = "test-with-format";
  with_format.capabilities = VB_BACKEND_CAN_FORMAT;
  with_format.format = format;
  g_assert_true (vb_backend_check (&with_format, &error));
  g_assert_no_error (error);
}

/* The two backends behind the name "kernel" are complete ones too. */
static void
test_kernel_parts_pass (void)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (vb_backend_check (&vb_kernel_md_backend, &error));
  g_assert_no_error (error);
  g_assert_true (vb_backend_check (&vb_kernel_dm_backend, &error));
  g_assert_no_error (error);
  g_assert_nonnull (vb_kernel_md_backend.engine);
  g_assert_null (vb_kernel_dm_backend.engine);
}

static void
test_built_in_pass (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *known = NULL;

  g_assert_true (vb_backends_init ("/nonexistent", NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  known = vb_backends_known_names ();
  for (const char *const *name = (const char *const[]){ "kernel", "ublk", "nbd", "loop", NULL };
       *name; name++)
    {
      const VbBackend *backend = vb_backend_lookup (*name);
      g_assert_nonnull (backend);
      g_assert_true (vb_backend_check (backend, &error));
      g_assert_no_error (error);
      g_assert_nonnull (strstr (known, *name));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/backend/register/built-in", test_built_in_pass);
  g_test_add_func ("/backend/register/kernel-parts", test_kernel_parts_pass);
  g_test_add_func ("/backend/register/missing-required", test_missing_required);
  g_test_add_func ("/backend/register/capability-without-callback",
                   test_capability_without_callback);
  g_test_add_func ("/backend/register/incomplete-engine-ops", test_incomplete_engine_ops);
  g_test_add_func ("/backend/register/complete", test_complete_passes);
  return g_test_run ();
}
