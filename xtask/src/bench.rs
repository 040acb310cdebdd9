pub fn run(_a: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("bench: not yet")
}
