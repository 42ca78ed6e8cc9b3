//! [`Names`]: the file names a listing gives, kept in one buffer (issue 16: a Hudi
//! timeline's folder holds thousands of names, listed on every sync; a `String` each was
//! an allocation and a free each).

/// File names, in the order listed, held in one string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<usize>,
}

impl Names {
    /// The names in `text`, each ending where `ends` says (in order, within `text`, on
    /// character boundaries).
    pub(crate) fn from_parts(text: String, ends: Vec<usize>) -> Self {
        Self { text, ends }
    }

    /// `name` listed after the others.
    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    /// The names, in the order listed.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        let mut start = 0;
        self.ends.iter().map(move |end| {
            let name = &self.text[start..*end];
            start = *end;
            name
        })
    }

    /// How many names there are.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

impl<'a> FromIterator<&'a str> for Names {
    fn from_iter<I: IntoIterator<Item = &'a str>>(names: I) -> Self {
        let mut out = Names::default();
        for name in names {
            out.push(name);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_back_as_pushed() {
        let listed = ["a.commit", "", "é", "b"];
        let names: Names = listed.into_iter().collect();
        assert_eq!(names.len(), 4);
        assert_eq!(names.iter().collect::<Vec<_>>(), listed);
        assert!(Names::default().is_empty());
        assert_eq!(Names::default().iter().count(), 0);
    }
}
