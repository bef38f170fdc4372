//! One paged LIST: every page of 500 objects, until the server's `continue` token ends.
//! A failed page fails the whole LIST (a partial list is never taken for a complete one).

use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

/// Objects a page.
pub const PAGE: u32 = 500;

/// Calls `f` with each object of every page as it arrives (only what `f` keeps is kept).
pub async fn for_each<K>(
    api: &Api<K>,
    lp: &ListParams,
    mut f: impl FnMut(K),
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut lp = lp.clone().limit(PAGE);
    loop {
        let page = api.list(&lp).await?;
        page.items.into_iter().for_each(&mut f);
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok(()),
        }
    }
}

/// Every object of every page.
pub async fn all<K>(api: &Api<K>, lp: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    for_each(api, lp, |k| out.push(k)).await?;
    Ok(out)
}
