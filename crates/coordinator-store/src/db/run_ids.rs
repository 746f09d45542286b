//! Run ids between the store and its backends: PostgreSQL holds them as
//! `uuid` (migration 0020), SQLite as their lowercase hyphenated text. Above
//! `db` a run id is a `String` on both: `db` binds an `Arg::Id` (and its
//! array forms) with [`pg_id`] or [`sqlite_id`], and reads a `uuid` column
//! where text is asked with [`uuid_as_text`].

use sqlx::Row as _;
use sqlx::postgres::PgRow;

/// A run id as PostgreSQL's `uuid` column holds it. Text that is not a UUID
/// (no run is ever admitted with one, `run_id::validate`) becomes the nil
/// UUID, which names no run: a lookup of it finds nothing.
pub(crate) fn pg_id(id: &str) -> uuid::Uuid {
    uuid::Uuid::try_parse(id).unwrap_or(uuid::Uuid::nil())
}

/// A run id as SQLite's text column holds it: a UUID in any form PostgreSQL's
/// `uuid` accepts (upper case, without hyphens) as its lowercase hyphenated
/// text, so a lookup finds the same run on both backends; other text as given.
pub(crate) fn sqlite_id(id: String) -> String {
    uuid::Uuid::try_parse(&id).map_or(id, |id| id.hyphenated().to_string())
}

/// Column `index` of `row` as text, when it is a `uuid` column and `T` is
/// `String` or `Option<String>`; `None` otherwise.
pub(crate) fn uuid_as_text<T: 'static>(row: &PgRow, index: usize) -> Option<Result<T, sqlx::Error>> {
    use sqlx::{Column as _, TypeInfo as _};
    use std::any::{Any, TypeId};
    let column = row.columns().get(index)?;
    if column.type_info().name() != "UUID" {
        return None;
    }
    let text = match row.try_get::<Option<uuid::Uuid>, _>(index) {
        Ok(id) => id.map(|id| id.hyphenated().to_string()),
        Err(e) => return Some(Err(e)),
    };
    let boxed: Box<dyn Any> = if TypeId::of::<T>() == TypeId::of::<String>() {
        match text {
            Some(text) => Box::new(text),
            None => return Some(Err(sqlx::Error::Decode("a NULL run id where one is required".into()))),
        }
    } else if TypeId::of::<T>() == TypeId::of::<Option<String>>() {
        Box::new(text)
    } else {
        return None;
    };
    boxed.downcast::<T>().ok().map(|value| Ok(*value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_in_any_form_names_one_run_and_other_text_none() {
        let id = "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10";
        for form in [id.to_owned(), id.to_uppercase(), id.replace('-', "")] {
            assert_eq!(pg_id(&form).hyphenated().to_string(), id);
            assert_eq!(sqlite_id(form), id);
        }
        assert_eq!(pg_id("not-a-uuid"), uuid::Uuid::nil());
        assert_eq!(sqlite_id("not-a-uuid".to_owned()), "not-a-uuid");
    }
}
