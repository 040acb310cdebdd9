//! The expression of `mfu-rs find`: tests, actions and operators in command-line order, parsed
//! with GNU find's precedence.
//!
//! ```text
//! expr    := and ( --or and )*
//! and     := unary ( [--and] unary )*         juxtaposition is an implicit --and
//! unary   := --not unary | ( expr ) | primary  `!` spells --not, `(`/`)` also --open/--close
//! ```
//!
//! So `--not` binds tightest, then `--and`, then `--or`; `a --or b c` is `a --or (b --and c)`.
//! Evaluation short-circuits left to right as in GNU find: `b` is not evaluated (nor its action
//! run) when `a` is true.

use std::fmt;

/// One word of the expression, in command-line order. `L` is what a primary (a test or an
/// action) is at this stage: as written, or resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Token<L> {
    /// A test or an action.
    Leaf(L),
    /// `--not` or `!`.
    Not,
    /// `--and` (what two adjacent primaries mean anyway).
    And,
    /// `--or`.
    Or,
    /// `(` or `--open`.
    Open,
    /// `)` or `--close`.
    Close,
}

impl<L> Token<L> {
    fn spelling(&self) -> &'static str {
        match self {
            Token::Leaf(_) => "a test",
            Token::Not => "--not",
            Token::And => "--and",
            Token::Or => "--or",
            Token::Open => "(",
            Token::Close => ")",
        }
    }
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr<L> {
    /// A test or an action.
    Leaf(L),
    /// True when the inner expression is false.
    Not(Box<Expr<L>>),
    /// True when every part is true; stops at the first false one.
    And(Vec<Expr<L>>),
    /// True when some part is true; stops at the first true one.
    Or(Vec<Expr<L>>),
}

impl<L> Expr<L> {
    /// The same expression with every leaf converted by `f` (in command-line order); the
    /// first error stops the conversion.
    pub fn try_map<M, E>(self, f: &mut impl FnMut(L) -> Result<M, E>) -> Result<Expr<M>, E> {
        Ok(match self {
            Expr::Leaf(l) => Expr::Leaf(f(l)?),
            Expr::Not(e) => Expr::Not(Box::new(e.try_map(f)?)),
            Expr::And(v) => Expr::And(
                v.into_iter()
                    .map(|e| e.try_map(f))
                    .collect::<Result<_, _>>()?,
            ),
            Expr::Or(v) => Expr::Or(
                v.into_iter()
                    .map(|e| e.try_map(f))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// Whether some leaf satisfies `pred`.
    pub fn any_leaf(&self, pred: &impl Fn(&L) -> bool) -> bool {
        match self {
            Expr::Leaf(l) => pred(l),
            Expr::Not(e) => e.any_leaf(pred),
            Expr::And(v) | Expr::Or(v) => v.iter().any(|e| e.any_leaf(pred)),
        }
    }

    /// Evaluate with `leaf` deciding each leaf, short-circuiting like GNU find.
    pub fn eval(&self, leaf: &mut impl FnMut(&L) -> bool) -> bool {
        match self {
            Expr::Leaf(l) => leaf(l),
            Expr::Not(e) => !e.eval(leaf),
            Expr::And(v) => v.iter().all(|e| e.eval(leaf)),
            Expr::Or(v) => v.iter().any(|e| e.eval(leaf)),
        }
    }
}

/// Why an expression does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parse `tokens`; `None` for an empty expression (which matches everything).
pub fn parse<L>(tokens: Vec<Token<L>>) -> Result<Option<Expr<L>>, ParseError> {
    if tokens.is_empty() {
        return Ok(None);
    }
    let mut p = Parser {
        tokens: tokens.into_iter().peekable(),
    };
    let e = p.or()?;
    match p.tokens.next() {
        None => Ok(Some(e)),
        Some(Token::Close) => Err(err("unbalanced ')': no '(' before it")),
        Some(t) => Err(err(format!("unexpected {}", t.spelling()))),
    }
}

fn err(msg: impl Into<String>) -> ParseError {
    ParseError(msg.into())
}

struct Parser<L, I: Iterator<Item = Token<L>>> {
    tokens: std::iter::Peekable<I>,
}

impl<L, I: Iterator<Item = Token<L>>> Parser<L, I> {
    fn or(&mut self) -> Result<Expr<L>, ParseError> {
        let mut terms = vec![self.and()?];
        while self.tokens.next_if(|t| matches!(t, Token::Or)).is_some() {
            self.expect_operand("--or")?;
            terms.push(self.and()?);
        }
        Ok(one_or(terms, Expr::Or))
    }

    fn and(&mut self) -> Result<Expr<L>, ParseError> {
        let mut factors = vec![self.unary()?];
        loop {
            match self.tokens.peek() {
                Some(Token::And) => {
                    self.tokens.next();
                    self.expect_operand("--and")?;
                    factors.push(self.unary()?);
                }
                Some(Token::Not | Token::Open | Token::Leaf(_)) => factors.push(self.unary()?),
                _ => break,
            }
        }
        Ok(one_or(factors, Expr::And))
    }

    /// Fails unless an operand of the operator `op` comes next.
    fn expect_operand(&mut self, op: &str) -> Result<(), ParseError> {
        match self.tokens.peek() {
            Some(Token::Not | Token::Open | Token::Leaf(_)) => Ok(()),
            Some(t) => Err(err(format!(
                "{op} needs a test after it, not {}",
                t.spelling()
            ))),
            None => Err(err(format!("{op} needs a test after it"))),
        }
    }

    fn unary(&mut self) -> Result<Expr<L>, ParseError> {
        match self.tokens.next() {
            Some(Token::Leaf(l)) => Ok(Expr::Leaf(l)),
            Some(Token::Not) => {
                self.expect_operand("--not")?;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some(Token::Open) => {
                if self.tokens.next_if(|t| matches!(t, Token::Close)).is_some() {
                    return Err(err("empty parentheses '( )'"));
                }
                let inner = self.or()?;
                match self.tokens.next() {
                    Some(Token::Close) => Ok(inner),
                    _ => Err(err("unbalanced '(': no ')' after it")),
                }
            }
            Some(Token::Close) => Err(err("unbalanced ')': no '(' before it")),
            Some(t @ (Token::Or | Token::And)) => {
                Err(err(format!("{} needs a test before it", t.spelling())))
            }
            None => Err(err("expected a test")),
        }
    }
}

fn one_or<L>(mut v: Vec<Expr<L>>, many: fn(Vec<Expr<L>>) -> Expr<L>) -> Expr<L> {
    if v.len() == 1 {
        v.pop().expect("one element")
    } else {
        many(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Token::*;

    fn l(c: char) -> Token<char> {
        Leaf(c)
    }

    fn show(e: &Expr<char>) -> String {
        match e {
            Expr::Leaf(c) => c.to_string(),
            Expr::Not(e) => format!("!{}", show(e)),
            Expr::And(v) => format!("({})", v.iter().map(show).collect::<Vec<_>>().join(" & ")),
            Expr::Or(v) => format!("({})", v.iter().map(show).collect::<Vec<_>>().join(" | ")),
        }
    }

    fn parsed(tokens: Vec<Token<char>>) -> String {
        parse(tokens).unwrap().map(|e| show(&e)).unwrap_or_default()
    }

    fn error(tokens: Vec<Token<char>>) -> String {
        parse(tokens).unwrap_err().0
    }

    #[test]
    fn and_binds_tighter_than_or_and_not_tightest() {
        assert_eq!(parsed(vec![]), "");
        assert_eq!(parsed(vec![l('a')]), "a");
        assert_eq!(parsed(vec![l('a'), l('b')]), "(a & b)");
        assert_eq!(parsed(vec![l('a'), And, l('b')]), "(a & b)");
        assert_eq!(parsed(vec![l('a'), Or, l('b'), l('c')]), "(a | (b & c))");
        assert_eq!(parsed(vec![l('a'), l('b'), Or, l('c')]), "((a & b) | c)");
        assert_eq!(parsed(vec![l('a'), Or, l('b'), Or, l('c')]), "(a | b | c)");
        assert_eq!(parsed(vec![Not, l('a'), l('b')]), "(!a & b)");
        assert_eq!(parsed(vec![Not, Not, l('a')]), "!!a");
        assert_eq!(
            parsed(vec![l('a'), Not, l('b'), Or, Not, l('c')]),
            "((a & !b) | !c)"
        );
    }

    #[test]
    fn parentheses_group() {
        assert_eq!(
            parsed(vec![Open, l('a'), Or, l('b'), Close, l('c')]),
            "((a | b) & c)"
        );
        assert_eq!(
            parsed(vec![Not, Open, l('a'), Or, l('b'), Close]),
            "!(a | b)"
        );
        assert_eq!(
            parsed(vec![l('a'), Open, Open, l('b'), Close, Or, l('c'), Close]),
            "(a & (b | c))"
        );
        assert_eq!(parsed(vec![Open, l('a'), Close]), "a");
    }

    #[test]
    fn malformed_expressions_are_errors() {
        assert!(error(vec![Open, l('a')]).contains("unbalanced '('"));
        assert!(error(vec![l('a'), Close]).contains("unbalanced ')'"));
        assert!(error(vec![Close]).contains("unbalanced ')'"));
        assert!(error(vec![Open, Close]).contains("empty"));
        assert!(error(vec![Or, l('a')]).contains("--or needs a test before"));
        assert!(error(vec![l('a'), Or]).contains("--or needs a test after"));
        assert!(error(vec![l('a'), Or, Or, l('b')]).contains("--or needs a test after"));
        assert!(error(vec![l('a'), And]).contains("--and needs a test after"));
        assert!(error(vec![Not]).contains("--not needs a test after"));
        assert!(error(vec![l('a'), Not, Close]).contains("--not needs a test after it, not )"));
        assert!(error(vec![Open, l('a'), Or, Close]).contains("--or needs a test after"));
    }

    #[test]
    fn evaluation_short_circuits_left_to_right() {
        let e = parse(vec![l('t'), Or, l('x'), l('y')]).unwrap().unwrap();
        let mut seen = String::new();
        assert!(e.eval(&mut |c| {
            seen.push(*c);
            *c == 't'
        }));
        assert_eq!(seen, "t");
        let e = parse(vec![l('f'), l('x'), Or, Not, l('f')])
            .unwrap()
            .unwrap();
        let mut seen = String::new();
        assert!(e.eval(&mut |c| {
            seen.push(*c);
            *c == 't'
        }));
        assert_eq!(seen, "ff");
    }
}
