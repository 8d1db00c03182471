// Package host is dsh's generic core: the plugin registry, the deployment
// loader, plugin contexts and services, owners, and the tools service. It
// knows nothing about terminals or shells; plugins bring those.
//
// # Lifecycle
//
// A plugin is registration data (Plugin), registered in init() with
// Register. Loading a deployment runs this sequence:
//
//  1. ParseDeployment reads the YAML list of entries, expands ${VAR} and
//     ${VAR:-default} in scalar values, and rejects duplicate ids and unknown
//     entry keys.
//  2. Resolve looks every enabled entry's plugin up in the registry, decodes
//     its config strictly on top of the plugin's defaults (unknown key, wrong
//     type), runs the config's Validate method, wires every injected service
//     key to its provider in the entry's realm, and orders the plugins so that
//     providers start first (document order breaks ties). A missing provider,
//     a duplicate provider and a cycle are errors here, before anything runs.
//  3. Start applies the plugins in that order. Each gets a Context: the
//     services it injected (Service), Provide for the ones it declared, a
//     logger, a lifetime context, and Defer for cleanups. If one fails, the
//     started ones unload in reverse order. Once all have started, the
//     checks they added with CheckLoaded run (a tool's backend type must be
//     registered by then); a failing one fails the load the same way.
//  4. Fronts (the MCP server, the REPL, `dsh call`) create an Owner per agent
//     and call tools through Host.Tools with it.
//  5. Host.Close closes every owner (running each owner's cleanups and
//     waiting for them), then unloads the plugins in reverse load order:
//     their lifetimes are cancelled and their cleanups run in reverse order,
//     awaited. Errors from every step are joined.
//
// # Realms
//
// Services live in realms. By default every key resolves in the root realm.
// A group entry with `isolate: {key: true}` gives its subtree a private realm
// for that key; `isolate: {key: label}` a realm shared by every group using
// the same label. Other keys still resolve in the enclosing realm.
//
// # Around the calls
//
// A few optional things let fronts and operators see more than results,
// none of which the model sees: probes (AddProbe; Host.Probe, dsh check
// --probe) try what a first call would do with what a plugin registered;
// call notes (WithNotes, Note) carry facts such as an exit code to an
// audit log; WithOutput and Output pass a call's output to a watcher as it
// comes (dsh repl); instances that are a Holder list what they hold for an
// owner (dsh sessions), and an Interrupter interrupts what runs for one
// (dsh repl's Ctrl-C). AddDocComments gives packages outside dsh's module
// the argument descriptions dsh's own get from doc comments.
//
// # Keeping
//
// A front can ask the plugins to keep what they can past the host's
// process (WithKeeping: the terminals keep shells in keepers that outlive
// dsh), and let an owner go rather than end it (Owner.Detach: its
// cleanups see Detaching and hand a shell back to its keeper). An owner
// of the same id, in this host or a later one, takes it back.
//
// # Errors
//
// Load errors are *DeploymentError values (file, line, entry, plugin) that
// wrap a sentinel (ErrUnknownPlugin, ErrInvalidConfig, ErrMissingProvider,
// ErrDuplicateService, ErrCycle, ErrDuplicateID, ErrInvalidEntry). Tool calls
// never return Go errors: every failure is a Result with IsError set.
package host
