//! Builds the one Rhai engine configuration the sandbox runs under.
//!
//! Owns the choice of language features and built-in function packages and
//! the translation of [`Limits`] into Rhai settings. It must not register
//! anything that reaches outside the arguments: no clock, sleep, file,
//! network, environment, randomness or output.

use rhai::packages::{
    ArithmeticPackage, BasicArrayPackage, BasicFnPackage, BasicIteratorPackage, BasicMapPackage, BasicMathPackage,
    BasicStringPackage, BitFieldPackage, LogicPackage, MoreStringPackage, Package,
};
use rhai::{Dynamic, Engine, EvalAltResult};

use crate::limits::{Limits, MAX_FUNCTIONS, MAX_VARIABLES};

/// A Rhai engine with the sandbox's packages, bounds and disabled symbols.
///
/// The packages are `StandardPackage` minus three parts, because
/// `StandardPackage` is not pure:
/// - `LanguageCorePackage` holds `sleep` (blocks the thread without counting
///   operations, so it defeats the operation bound), `exit`, value tags,
///   `parse_json` and function reflection; a function needs none of them.
/// - `BasicTimePackage` (`timestamp()`) is a clock; the crate's `no_time`
///   feature already leaves it out, and it stays out here too.
/// - `BasicBlobPackage`: binary data has no JSON form.
///
/// Language keywords (`if`, `for`, `fn`, closures, `throw`, `try`, `Fn`,
/// `call`, `type_of`, ...) are part of the engine, not of a package.
pub(crate) fn sandbox_engine(limits: &Limits) -> Engine {
    let mut engine = Engine::new_raw();

    engine.register_global_module(ArithmeticPackage::new().as_shared_module());
    engine.register_global_module(LogicPackage::new().as_shared_module());
    engine.register_global_module(BitFieldPackage::new().as_shared_module());
    engine.register_global_module(BasicMathPackage::new().as_shared_module());
    engine.register_global_module(BasicStringPackage::new().as_shared_module());
    engine.register_global_module(MoreStringPackage::new().as_shared_module());
    engine.register_global_module(BasicIteratorPackage::new().as_shared_module());
    engine.register_global_module(BasicFnPackage::new().as_shared_module());
    engine.register_global_module(BasicArrayPackage::new().as_shared_module());
    engine.register_global_module(BasicMapPackage::new().as_shared_module());

    // Rhai reads 0 as "unlimited"; a lowered limit must never lift the bound.
    engine.set_max_operations(limits.max_operations.max(1));
    engine.set_max_call_levels(limits.max_call_depth.max(1));
    let expr_depth = limits.max_expr_depth.max(1);
    engine.set_max_expr_depths(expr_depth, expr_depth);
    engine.set_max_string_size(limits.max_string_bytes.max(1));
    // Also bounds BLOBs: Rhai has no separate BLOB setting.
    engine.set_max_array_size(limits.max_collection_entries.max(1));
    engine.set_max_map_size(limits.max_collection_entries.max(1));
    engine.set_max_variables(MAX_VARIABLES);
    engine.set_max_functions(MAX_FUNCTIONS);

    check_containers_on_access(&mut engine);

    // `eval` would compile new code at run time, outside every check.
    engine.disable_symbol("eval");
    // A method mutating `this` grows its object without reading a variable,
    // which would bypass `check_containers_on_access`; pure functions over
    // JSON arguments have no use for methods on their own values.
    engine.disable_symbol("this");
    // The raw engine already drops output; saying so keeps it that way if
    // Rhai's defaults ever change.
    engine.on_print(|_| {});
    engine.on_debug(|_, _, _| {});
    // A misspelt variable is a compile error, reported by `coordinatorctl check`.
    engine.set_strict_variables(true);

    engine
}

/// Rhai checks the size of the *new value* in `m[key] = value` and
/// `a[i] = value`, but not the size of the map or array it lands in, so a
/// loop of index assignments grows one container past every bound (found
/// with rhai 1.27: a loop under the default limits held ~490 MB before the
/// operation bound stopped it). Checking the value of every variable when it
/// is read closes that: such an assignment reads its variable first, so a
/// container is at most one assignment past its bounds before the next read
/// stops the call. (`this`, the one root that is not a variable, is disabled.)
///
/// The cost is one walk of a container per read of it. Rhai already walks a
/// container after every mutating method call (`push`, `+=`, ...), so the
/// worst case per call stays O(operations x entries); only the constant grows.
fn check_containers_on_access(engine: &mut Engine) {
    // Rhai marks `on_var` "volatile", not deprecated.
    #[allow(deprecated)]
    engine.on_var(|name, index, context| {
        let scope = context.scope();
        // `index` counts from the end of the scope, as Rhai resolves it; 0 means "search by name".
        let value = match scope.len().checked_sub(index) {
            Some(position) if index > 0 => scope.iter_raw().nth(position).map(|(.., value)| value),
            _ => scope.get(name),
        };
        if let Some(value) = value {
            check_size(context.engine(), value)?;
        }
        Ok(None)
    });
}

fn check_size(engine: &Engine, value: &Dynamic) -> Result<(), Box<EvalAltResult>> {
    if value.is_shared() {
        // A variable captured by a closure. If its cell is borrowed right
        // now, the next read checks it instead.
        return match value.read_lock::<Dynamic>() {
            Some(inner) => check_size(engine, &inner),
            None => Ok(()),
        };
    }
    engine.ensure_data_size_within_limits(value)
}
