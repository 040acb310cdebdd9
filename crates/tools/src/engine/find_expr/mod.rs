//! find's expression: GNU find's tests, actions and operators ([`expr`], [`Primary`]), their
//! resolution on rank 0 (clock, reference files, user and group names: [`resolve`]), and their
//! evaluation over a list ([`eval`]). `mfu-rs find` runs whole expressions with their actions;
//! `mfu-rs sh` selects entries of a list it holds with [`select`].

pub mod eval;
pub mod expr;
pub mod lustre;
mod primary;
pub mod resolve;

pub use primary::Primary;

use crate::engine::context::{Context, Error};
use eval::Evaluator;
use expr::Expr;
use steal::Comm;

/// The indices of this rank's entries of `list` for which `expr` is true (`None`: all), with
/// the tests resolved once on rank 0 (clock, reference files, names: the list's tables help) as
/// a `find` run resolves them; for a caller that holds a list already (`mfu-rs sh`). An
/// expression with an action is refused: nothing is printed or run here. Collective; `Err` is
/// the same on every rank.
pub fn select(
    comm: &dyn Comm,
    list: &flist::FileList,
    expr: Option<Expr<Primary>>,
    context: &Context,
) -> Result<Vec<usize>, Error> {
    if expr
        .as_ref()
        .is_some_and(|e| e.any_leaf(&|p| p.is_action()))
    {
        return Err(Error::new(
            "--print, --print0 and --exec are not allowed here: the entries found are listed",
        ));
    }
    let expr = resolve::resolve(comm, expr, (&list.users, &list.groups)).map_err(Error::new)?;
    // Lustre tests read layouts by path; off Lustre each answers "no layout".
    let lustre = Some(crate::engine::lustre::LustreHandle::default());
    Ok(Evaluator::new(expr.as_ref(), false, context)
        .with_lustre(lustre)
        .run(list)
        .matched)
}
